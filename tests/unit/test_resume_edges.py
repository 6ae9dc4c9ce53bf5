"""Resuming a run whose circumstances changed: its config's optimizer settings and best figure, another number of
processes, another ``valid_every``, a finished run started again, a save cut between ``step_N.pt`` and ``best.pt``,
a run dir left with ``best.pt`` alone, a checkpoint of another model, fp16 loss scaling turned on, a data
directory moved or its training split changed in place, a signal at the last update."""

import os
import shutil
import signal

import pytest
import torch

from ordo import api
from ordo.checkpoint import load_checkpoint, step_checkpoints
from ordo.cli import main
from ordo.config import load_config, save_config
from ordo.data.corpus import DataMeta, TokenArray, write_token_array
from ordo.errors import CheckpointError, ConfigError, TrainingInterrupted
from ordo.training import trainer as trainer_module
from ordo.training.distributed import DistributedContext
from ordo.training.trainer import Trainer, rescaled_position

TINY = ["model.preset=tiny", "model.d_model=16", "model.ffn_dim=32", "train.max_tokens=300", "train.warmup_steps=5",
        "train.lr=2e-3", "train.progress=false", "train.valid_bleu=false", "train.threads=1", "train.device=cpu"]


def config(data, *overrides):
    return load_config(None, [f"data={data}", *TINY, *overrides])


def resume(run, **train):
    """Train ``run`` again with its saved config, ``train`` overriding its train section."""
    return api.train(api.run_config(run, {"train": train}), run)


def names(run):
    return [path.name for path in step_checkpoints(run / "checkpoints")]


def progress_of(path):
    return load_checkpoint(path)["progress"]


def test_optimizer_settings_changed_on_resume_take_effect(small_data, tmp_path):
    """Before, the optimizer kept the β, ε and weight decay it was saved with while config.yaml said otherwise."""
    run = tmp_path / "run"
    api.train(config(small_data, "train.max_steps=2", "train.valid_every=2", "train.weight_decay=0.01"), run)
    resume(run, max_steps=3, weight_decay=0.0, adam_betas=[0.8, 0.9], adam_eps=1e-6)
    group = load_checkpoint(run / "checkpoints" / "step_3.pt")["optimizer"]["param_groups"][0]
    assert (group["weight_decay"], tuple(group["betas"]), group["eps"]) == (0.0, (0.8, 0.9), 1e-6)
    assert not group["decoupled_weight_decay"]  # plain Adam, as build_optimizer chose for weight_decay 0


class RankOf(DistributedContext):
    """Process ``rank`` of ``world_size`` on the CPU, without a process group (load_state needs none)."""

    def __init__(self, rank: int, world_size: int) -> None:
        super().__init__("cpu")
        self.rank, self.world_size = rank, world_size

    def wrap(self, model):
        return model


def make_trainer(data, run, dist=None, *overrides):
    cfg = config(data, *overrides)
    return Trainer(api.build_for_data(cfg, DataMeta.load(data)).model, cfg, run, dist=dist)


def test_another_number_of_processes_resumes_at_the_same_batch_of_the_epoch(small_data, tmp_path):
    """Before, the position (a batch of each process's share) was kept as it was: two processes' checkpoint at
    their 2nd batch resumed one process at the epoch's 2nd batch, training the 2nd and 3rd again."""
    run = tmp_path / "run"
    api.train(config(small_data, "train.max_steps=3", "train.valid_every=3"), run)
    state = load_checkpoint(run / "checkpoints" / "step_3.pt")
    state["rng"] = [state["rng"][0], state["rng"][0]]  # as two processes save it
    state["progress"]["position"] = 2  # each of the two has taken 2 batches: 4 of the epoch
    single = make_trainer(small_data, tmp_path / "single")
    single.load_state(state)
    assert single.progress.position == 4
    torch.manual_seed(12345)  # rank 2 of three: the checkpoint has no RNG state of it, it keeps its own
    own = torch.get_rng_state()
    third = make_trainer(small_data, tmp_path / "third", RankOf(2, 3))
    torch.set_rng_state(own)
    third.load_state(state)
    assert third.progress.position == 1 and torch.equal(torch.get_rng_state(), own)
    assert [rescaled_position(5, 1, 2), rescaled_position(3, 4, 4), rescaled_position(0, 2, 1)] == [2, 3, 0]


def test_another_valid_every_on_resume_keeps_the_old_grid_and_drops_the_end_of_the_last_run(small_data, tmp_path):
    """Before, pruning dropped every checkpoint that was not a multiple of the new valid_every."""
    run = tmp_path / "run"
    api.train(config(small_data, "train.max_steps=7", "train.valid_every=2", "train.keep_last=5"), run)
    assert names(run) == ["step_2.pt", "step_4.pt", "step_6.pt", "step_7.pt"]  # 7: the end, off the grid
    resume(run, max_steps=9, valid_every=3)
    assert names(run) == ["step_2.pt", "step_4.pt", "step_6.pt", "step_9.pt"]


def test_a_finished_run_started_again_is_not_validated_and_saved_again(small_data, tmp_path, caplog):
    """Before, a run that had finished its epochs validated again and counted one more bad validation."""
    run = tmp_path / "run"
    api.train(config(small_data, "train.max_epochs=1", "train.max_tokens=2000", "train.valid_every=1000"), run)
    (checkpoint,) = step_checkpoints(run / "checkpoints")
    before = progress_of(checkpoint)
    resume(run)
    assert progress_of(checkpoint) == before
    assert (run / "train.log").read_text().count("valid | update") == 1


def test_a_run_stopped_by_a_signal_at_what_becomes_its_last_update_validates_it_when_run_again(small_data, tmp_path,
                                                                                             monkeypatch):
    """As an uninterrupted run does at its end; before, the rerun found the run finished and left the last
    checkpoint unvalidated (and best.pt without it). (A signal at the last update of the run as started finishes
    it instead: test_a_signal_at_the_last_update_finishes_the_run_with_status_0.)"""
    real_step = signal_at_update(monkeypatch, 3)
    run = tmp_path / "run"
    with pytest.raises(TrainingInterrupted):
        api.train(config(small_data, "train.max_steps=5", "train.valid_every=2"), run)
    assert load_checkpoint(run / "checkpoints" / "step_3.pt")["valid"] is None
    monkeypatch.setattr(Trainer, "train_step", real_step)
    resume(run, max_steps=3)
    assert load_checkpoint(run / "checkpoints" / "step_3.pt")["valid"] is not None
    assert progress_of(run / "checkpoints" / "best.pt")["step"] == 3  # the loss still falls at update 3


def test_turning_bleu_off_on_resume_starts_the_best_afresh_instead_of_comparing_a_loss_with_bleu(small_data,
                                                                                                  tmp_path):
    """Before, -loss never beat the BLEU best: best.pt froze and patience stopped a run whose loss fell."""
    run = tmp_path / "run"
    api.train(config(small_data, "train.max_steps=4", "train.valid_every=2", "train.valid_bleu=true",
                     "train.valid_max_sentences=5"), run)
    progress = resume(run, max_steps=10, valid_bleu=False, patience=2)
    assert progress.step == 10 and progress.best_metric == "loss"
    assert progress_of(run / "checkpoints" / "best.pt")["step"] == 10  # the loss falls at every validation


def test_a_save_cut_between_the_step_checkpoint_and_best_pt_is_repaired_on_resume(small_data, tmp_path, monkeypatch):
    """Before, best.pt kept update 2's model while the run counted update 4's validation as its best."""
    real_save = trainer_module.save_checkpoint

    class Killed(Exception):
        pass

    def killed_at_best_of_update_4(state, path):
        if state["progress"]["step"] == 4 and path.name == "best.pt":
            raise Killed
        real_save(state, path)

    monkeypatch.setattr(trainer_module, "save_checkpoint", killed_at_best_of_update_4)
    run = tmp_path / "run"
    with pytest.raises(Killed):
        api.train(config(small_data, "train.max_steps=4", "train.valid_every=2", "train.best_metric=loss"), run)
    assert progress_of(run / "checkpoints" / "best.pt")["step"] == 2
    monkeypatch.setattr(trainer_module, "save_checkpoint", real_save)
    progress = resume(run)
    best = load_checkpoint(run / "checkpoints" / "best.pt")
    assert best["progress"]["step"] == 4 and best["progress"]["best"] == progress.best


def test_best_pt_without_step_checkpoints_is_refused_rather_than_overwritten(small_data, tmp_path):
    """Before, the run started afresh and its first validation overwrote best.pt."""
    run = tmp_path / "run"
    api.train(config(small_data, "train.max_steps=4", "train.valid_every=2"), run)
    for path in step_checkpoints(run / "checkpoints"):
        path.unlink()
    with pytest.raises(CheckpointError, match=r"best.pt: the run has no step_N.pt .* train.init_from="):
        resume(run, max_steps=6)
    assert progress_of(run / "checkpoints" / "best.pt")["step"] == 4


def test_a_checkpoint_of_another_model_is_named_instead_of_a_traceback(small_data, tmp_path):
    """A run dir without config.yaml (which refuses another model section) resumed with another model."""
    run = tmp_path / "run"
    api.train(config(small_data, "train.max_steps=2", "train.valid_every=2"), run)
    (run / "config.yaml").unlink()
    with pytest.raises(CheckpointError, match=r"step_2.pt: does not fit the model this config builds \(.*size "
                                              r"mismatch"):
        api.train(config(small_data, "model.d_model=32", "train.max_steps=3"), run)


def test_a_checkpoint_saved_without_fp16_resumes_with_fp16_loss_scaling(small_data, tmp_path):
    """Before, the empty scaler state of a run without fp16 made an enabled GradScaler raise a RuntimeError."""
    run = tmp_path / "run"
    api.train(config(small_data, "train.max_steps=2", "train.valid_every=2"), run)
    state = load_checkpoint(run / "checkpoints" / "step_2.pt")
    assert state["scaler"] == {}
    trainer = make_trainer(small_data, tmp_path / "fp16")
    trainer.scaler = torch.amp.GradScaler("cpu", enabled=True)  # as train.amp=fp16 makes on a GPU
    trainer.load_state(state)
    assert trainer.progress.step == 2 and trainer.scaler.get_scale() == torch.amp.GradScaler("cpu").get_scale()


def test_a_run_on_one_data_directory_resumes_mid_epoch_after_the_directory_moved(small_data, tmp_path):
    """Before, the checkpoint's recorded path stopped the run ("list it again to resume"), which a corpus copied
    to a job's local disk under a new path cannot do; a list of shards still needs the recorded one."""
    moved = tmp_path / "moved"
    shutil.copytree(small_data, moved)
    run = tmp_path / "run"
    api.train(config(small_data, "train.max_steps=2", "train.valid_every=2"), run)
    api.train(api.run_config(run, {"data": str(moved), "train": {"max_steps": 4}}), run)
    api.train(config(small_data, "train.max_steps=4", "train.valid_every=2"), tmp_path / "straight")
    resumed, straight = (load_checkpoint(r / "checkpoints" / "step_4.pt") for r in (run, tmp_path / "straight"))
    assert resumed["progress"]["position"] == straight["progress"]["position"]
    assert all(torch.equal(resumed["model"][k], straight["model"][k]) for k in straight["model"])


def rewrite_training_split(data, order):
    """Write the training split of ``data`` again with its pairs ``order`` (indices), as a preparation in place
    with other settings would, keeping the vocabulary."""
    meta = DataMeta.load(data)
    for side, size in (("src", meta.src_vocab_size), ("tgt", meta.tgt_vocab_size)):
        array = TokenArray.open(data / f"train.{side}")
        rows = [array[i] for i in order]
        write_token_array(data / f"train.{side}", rows, size)
    meta.splits["train"] = len(order)
    meta.save(data)


def split_counts(data):
    """Rows and tokens of each side of the training split of ``data``."""
    arrays = {side: TokenArray.open(data / f"train.{side}") for side in ("src", "tgt")}
    return {side: (len(array), int(array.offsets[-1])) for side, array in arrays.items()}


@pytest.mark.parametrize("change", ["fewer pairs", "pairs in another order"])
def test_training_data_changed_in_place_is_named_when_resuming_mid_epoch(small_data, tmp_path, caplog, change):
    """Before, the checkpoint's place in the epoch indexed the new data's list of batches without a word."""
    data = tmp_path / "data"
    shutil.copytree(small_data, data)
    run = tmp_path / "run"
    api.train(config(data, "train.max_steps=2", "train.valid_every=2"), run)
    before = split_counts(data)
    pairs = before["src"][0]
    rewrite_training_split(data, range(100, pairs) if change == "fewer pairs" else range(pairs - 1, -1, -1))
    after = split_counts(data)
    with caplog.at_level("WARNING", logger="ordo"):
        resume(run, max_steps=3)
    assert "the training data changed since the checkpoint was saved" in caplog.text
    for side in ("src", "tgt"):
        now = f"{after[side][0]} rows, {after[side][1]} tokens"
        expected = (f"{data}/train.{side}: {before[side][0]} rows, {before[side][1]} tokens -> {now}"
                    if change == "fewer pairs" else f"{data}/train.{side}: other row lengths ({now})")
        assert expected in caplog.text
    assert "epoch 1 goes on from batch 2" in caplog.text


def test_a_resume_on_unchanged_data_is_silent_and_repeats_an_uninterrupted_run(small_data, tmp_path, caplog):
    run = tmp_path / "run"
    api.train(config(small_data, "train.max_steps=2", "train.valid_every=2"), run)
    with caplog.at_level("WARNING", logger="ordo"):
        resume(run, max_steps=4)
    assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.text
    api.train(config(small_data, "train.max_steps=4", "train.valid_every=2"), tmp_path / "straight")
    resumed, straight = (load_checkpoint(r / "checkpoints" / "step_4.pt") for r in (run, tmp_path / "straight"))
    assert resumed["progress"] == straight["progress"] | {"train_seconds": resumed["progress"]["train_seconds"]}
    assert all(torch.equal(resumed["model"][k], straight["model"][k]) for k in straight["model"])


def signal_at_update(monkeypatch, step, signal_number=signal.SIGTERM):
    """Make training send ``signal_number`` to this process during update ``step``."""
    real_step = Trainer.train_step

    def step_then_signal(self, group, stats):
        real_step(self, group, stats)
        if self.progress.step == step:
            os.kill(os.getpid(), signal_number)

    monkeypatch.setattr(Trainer, "train_step", step_then_signal)
    return real_step


@pytest.mark.parametrize("limit", ["train.max_steps=3", "train.max_epochs=1"])
def test_a_signal_at_the_last_update_finishes_the_run_with_status_0(small_data, tmp_path, monkeypatch, capsys, limit):
    """Before, the run that had done its last update was saved unvalidated and `ordo train` exited 143."""
    epoch = make_trainer(small_data, tmp_path / "probe", None, "train.max_tokens=2000").batches.epoch_batch_list(1)
    last = 3 if limit == "train.max_steps=3" else len(epoch)
    signal_at_update(monkeypatch, last)
    run = tmp_path / "run"
    sets = [arg for key in [*TINY, "train.max_tokens=2000", "train.valid_every=1000", limit] for arg in ("--set", key)]
    assert main(["train", "--data", str(small_data), "--out", str(run), *sets]) == 0
    assert "SIGTERM arrived at the last update of the run: finishing it as usual" in capsys.readouterr().err
    (checkpoint,) = step_checkpoints(run / "checkpoints")
    state = load_checkpoint(checkpoint)
    assert state["progress"]["step"] == last and state["valid"] is not None  # validated, as without the signal
    assert load_checkpoint(run / "checkpoints" / "best.pt")["progress"]["step"] == last


def test_a_signal_before_the_last_update_still_stops_with_its_status(small_data, tmp_path, monkeypatch, capsys):
    signal_at_update(monkeypatch, 2, signal.SIGINT)
    run = tmp_path / "run"
    sets = [arg for key in [*TINY, "train.max_steps=3", "train.valid_every=1000"] for arg in ("--set", key)]
    assert main(["train", "--data", str(small_data), "--out", str(run), *sets]) == 128 + signal.SIGINT
    assert "stopped by SIGINT after update 2" in capsys.readouterr().err
    assert load_checkpoint(run / "checkpoints" / "step_2.pt")["valid"] is None


def test_train_out_naming_a_file_is_a_one_line_error(small_data, tmp_path, capsys):
    """Before, a FileExistsError traceback from creating train.log's folder."""
    from ordo.cli import main

    not_a_run = tmp_path / "model.pt"
    not_a_run.write_bytes(b"x")
    assert main(["train", "--data", str(small_data), "--out", str(not_a_run), "--preset", "tiny"]) == 2
    assert f"ordo train: error: --out {not_a_run}: a file, not a run directory" in capsys.readouterr().err


def test_resuming_with_settings_that_make_the_batches_changed_warns_naming_each(tmp_path, caplog):
    run = tmp_path / "run"
    run.mkdir()
    save_config(config(tmp_path / "data"), run / "config.yaml")
    with caplog.at_level("WARNING", logger="ordo"):
        api.run_config(run, {"train": {"max_steps": 9, "lr": 1e-3}})
    assert "changed" not in caplog.text, "a longer run or another learning rate keeps the batches"
    with caplog.at_level("WARNING", logger="ordo"):
        api.run_config(run, {"train": {"max_tokens": 200, "seed": 3}})
    assert "train.seed (1 -> 3), train.max_tokens (300 -> 200) changed" in caplog.text
    assert str(run / "config.yaml") in caplog.text


def test_a_model_setting_given_again_on_resume_is_compared_with_the_runs_own_model(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    save_config(config(tmp_path / "data"), run / "config.yaml")
    assert api.run_config(run, {"model": {"d_model": 16}}).model.d_model == 16, "the run's own width, given again"
    for model in ({"d_model": 32}, {"preset": "small"}, {"preset": "tiny"}):  # tiny alone: not the run's d_model 16
        with pytest.raises(ConfigError, match="different model section"):
            api.run_config(run, {"model": model})
