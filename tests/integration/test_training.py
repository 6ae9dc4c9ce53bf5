"""Training runs on a tiny model: loss falls, resume is exact, auxiliary losses are weighted and logged."""

import dataclasses
import shutil
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from ordo import api
from ordo.checkpoint import load_checkpoint, step_checkpoints
from ordo.config import load_config
from ordo.data.corpus import DataMeta, TokenArray
from ordo.errors import CheckpointError, ConfigError, InputError
from ordo.losses import AuxLoss
from ordo.methods import METHODS, Method

TINY = ["model.preset=tiny", "model.d_model=32", "model.ffn_dim=64", "train.max_tokens=400", "train.warmup_steps=20",
        "train.lr=3e-3", "train.progress=false", "train.valid_bleu=false", "train.threads=2"]


def config(data, *overrides):
    return load_config(None, [f"data={data}", *TINY, *overrides])


def final_weights(run_dir):
    return load_checkpoint(step_checkpoints(run_dir / "checkpoints")[-1])["model"]


def test_interrupted_and_resumed_run_ends_with_the_same_parameters(small_data, tmp_path):
    common = ["train.update_freq=2", "train.valid_every=3", "model.dropout=0.3", "train.seed=5"]
    api.train(config(small_data, *common, "train.max_steps=7"), tmp_path / "straight")
    api.train(config(small_data, *common, "train.max_steps=3"), tmp_path / "resumed")
    resumed_cfg = api.run_config(tmp_path / "resumed", {"train": {"max_steps": 7}})
    progress = api.train(resumed_cfg, tmp_path / "resumed")
    assert progress.step == 7 and progress.epoch == 1  # stopped mid-epoch, resumed mid-epoch
    straight, resumed = final_weights(tmp_path / "straight"), final_weights(tmp_path / "resumed")
    assert straight.keys() == resumed.keys()
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)
    state = load_checkpoint(step_checkpoints(tmp_path / "resumed" / "checkpoints")[-1])
    assert state["progress"]["step"] == 7


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run by bench/gpu/check.sh)")
def test_a_compiled_run_on_a_gpu_resumes_to_the_same_parameters(small_data, tmp_path):
    common = ["train.update_freq=2", "train.valid_every=3", "model.dropout=0.3", "train.seed=5", "train.device=cuda",
              "train.compile=default"]
    api.train(config(small_data, *common, "train.max_steps=7"), tmp_path / "straight")
    api.train(config(small_data, *common, "train.max_steps=3"), tmp_path / "resumed")
    api.train(api.run_config(tmp_path / "resumed", {"train": {"max_steps": 7}}), tmp_path / "resumed")
    straight, resumed = final_weights(tmp_path / "straight"), final_weights(tmp_path / "resumed")
    differing = [k for k in straight if not torch.equal(straight[k], resumed[k])]
    assert not differing


def test_validation_loss_falls_and_best_checkpoint_is_kept(small_data, tmp_path):
    cfg = config(small_data, "train.max_steps=120", "train.valid_every=40", "train.keep_last=2")
    api.train(cfg, tmp_path / "run")
    ckpts = step_checkpoints(tmp_path / "run" / "checkpoints")
    assert [p.name for p in ckpts] == ["step_80.pt", "step_120.pt"]
    losses = [load_checkpoint(p)["valid"]["loss"] for p in ckpts]
    assert losses[-1] < 3.0
    assert (tmp_path / "run" / "checkpoints" / "best.pt").exists()
    log = (tmp_path / "run" / "train.log").read_text()
    assert "parameters" in log and "valid | update 40" in log


@dataclass
class ShrinkConfig:
    weight: float = 1.0  # weight of the toy loss


def test_auxiliary_loss_is_weighted_logged_and_optimised(small_data, tmp_path, monkeypatch):
    def encoder_norm(output, batch):
        return output.extras["enc_norm"]

    def apply(slots, cfg):
        wrap = lambda encoder: NormReporting(encoder)
        slots.claim("encoder_wrapper", "shrink", wrap)

    monkeypatch.setitem(METHODS, "shrink", Method("shrink", ShrinkConfig, apply,
                                                  lambda cfg: [AuxLoss("enc_norm", cfg.weight, encoder_norm)]))
    def logged_norms(weight):
        cfg = config(small_data, "train.max_steps=40", "train.valid_every=40", "train.log_every=10",
                     f"model.methods.shrink.weight={weight}")
        api.train(cfg, tmp_path / f"w{weight}")
        lines = (tmp_path / f"w{weight}" / "train.log").read_text().splitlines()
        return [float(line.split("enc_norm ")[1].split()[0]) for line in lines if "enc_norm" in line]

    unweighted, weighted = logged_norms(0.0), logged_norms(5.0)
    assert len(weighted) == 4 and weighted[0] == pytest.approx(unweighted[0], rel=0.05)
    assert weighted[-1] < 0.9 * unweighted[-1]


class NormReporting(torch.nn.Module):
    """Encoder wrapper that reports the mean squared encoder state as a named extra."""

    def __init__(self, encoder):
        super().__init__()
        self.inner = encoder

    def forward(self, batch):
        out = self.inner(batch)
        out.extras["enc_norm"] = out.states.pow(2).mean()
        return out


def test_rnn_family_trains_with_the_same_trainer(small_data, tmp_path):
    cfg = config(small_data, "model.family=rnn", "train.max_steps=30", "train.valid_every=15")
    api.train(cfg, tmp_path / "rnn")
    losses = [load_checkpoint(p)["valid"]["loss"] for p in step_checkpoints(tmp_path / "rnn" / "checkpoints")]
    assert losses[1] < losses[0]
    run = api.load_run(tmp_path / "rnn", "last", "cpu")
    assert len(run.translate(["the dog sees a cat .", "a big bird runs ."], beam_size=3)) == 2


def test_changed_model_section_on_resume_is_refused(small_data, tmp_path):
    api.train(config(small_data, "train.max_steps=2", "train.valid_every=2"), tmp_path / "run")
    with pytest.raises(ConfigError, match="different model section"):
        api.run_config(tmp_path / "run", {"model": {"preset": "small"}})


def test_corrupt_checkpoint_is_a_clear_error(small_data, tmp_path):
    api.train(config(small_data, "train.max_steps=2", "train.valid_every=2"), tmp_path / "run")
    path = step_checkpoints(tmp_path / "run" / "checkpoints")[-1]
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="step_2.pt: cannot read checkpoint"):
        api.load_run(tmp_path / "run", "last")


def test_a_dev_line_too_long_for_the_position_table_is_refused_before_training(small_data, tmp_path):
    """Before, ``ordo prepare`` kept the over-long dev pair and training failed at its first validation with a
    traceback from the position table."""
    from ordo.data.prepare import PrepareConfig, prepare

    valid = tmp_path / "valid.src"
    long_line = " ".join(["word"] * 200)
    valid.write_text((small_data / "valid.src.txt").read_text(encoding="utf-8") + long_line + "\n", encoding="utf-8")
    target = tmp_path / "valid.tgt"
    target.write_text((small_data / "valid.tgt.txt").read_text(encoding="utf-8") + "word\n", encoding="utf-8")
    data = tmp_path / "data"
    prepare(PrepareConfig(train_src=str(small_data / "train.src.txt"), train_tgt=str(small_data / "train.tgt.txt"),
                          valid_src=str(valid), valid_tgt=str(target), out=str(data), vocab_from=str(small_data),
                          max_len=30), progress=False)
    lengths = [TokenArray.open(data / name).lengths for name in ("train.src", "train.tgt", "valid.src", "valid.tgt")]
    limit = max(int(array[:-1].max()) if index == 2 else int(array.max()) for index, array in enumerate(lengths))
    line = len(lengths[2])
    with pytest.raises(InputError, match=rf"valid\.src\.txt:{line}: \d+ pieces, more than model\.max_positions-1="
                                         rf"{limit} \(1 such lines\); raise model\.max_positions, or drop them"):
        api.train(config(data, f"model.max_positions={limit + 1}", "train.max_steps=1"), tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_early_stopping_after_patience_validations_without_improvement(small_data, tmp_path):
    cfg = config(small_data, "train.lr=0", "train.warmup_init_lr=0", "train.max_steps=100", "train.valid_every=2",
                 "train.patience=2", "train.best_metric=loss")
    progress = api.train(cfg, tmp_path / "run")
    assert progress.step == 6 and progress.bad_validations == 2
    assert "no improvement in 2 validations" in (tmp_path / "run" / "train.log").read_text()


def make_trainer(data, run_dir, *overrides):
    from ordo.build import build_model
    from ordo.training.trainer import Trainer

    cfg = config(data, *overrides)
    return Trainer(build_model(cfg.model, 200, 200).model, cfg, run_dir)


def test_batch_by_target_fills_batches_with_target_tokens_only(small_data, tmp_path):
    by_longer = make_trainer(small_data, tmp_path / "a", "train.max_tokens=200")
    by_target = make_trainer(small_data, tmp_path / "b", "train.max_tokens=200", "train.batch_by=target")
    src, tgt = by_target.batches.train_data.src.lengths, by_target.batches.train_data.tgt.lengths
    target_batches, longer_batches = by_target.batches.epoch_batch_list(1), by_longer.batches.epoch_batch_list(1)
    for batches in (target_batches, longer_batches):
        assert sorted(np.concatenate(batches).tolist()) == list(range(len(src)))  # every pair once
    assert all(len(b) == 1 or len(b) * (tgt[b].max() + 1) <= 200 for b in target_batches)
    assert any(len(b) * (src[b].max() + 1) > 200 for b in target_batches)  # the source side was not counted
    assert all(len(b) == 1 or len(b) * (np.maximum(src, tgt)[b].max() + 1) <= 200 for b in longer_batches)


def test_a_compiled_run_pads_its_batches_to_multiples_of_8_and_an_eager_one_does_not(small_data, tmp_path):
    eager = make_trainer(small_data, tmp_path / "a")
    compiled = make_trainer(small_data, tmp_path / "b", "train.compile=default")  # compiles at its first step only
    rows = np.arange(5)
    eager_batch = eager.batches.host_batch(eager.batches.train_data, rows)
    compiled_batch = compiled.batches.host_batch(compiled.batches.train_data, rows)
    assert compiled_batch.src_tokens.shape[1] % 8 == 0 and compiled_batch.tgt_out.shape[1] % 8 == 0
    assert eager_batch.src_tokens.shape[1] == eager.batches.train_data.src.lengths[rows].max() + 1  # the longest row + EOS


def test_target_bucket_needs_batch_by_target(small_data, tmp_path):
    with pytest.raises(ConfigError, match="train.target_bucket: a width >= 1 with train.batch_by: target"):
        make_trainer(small_data, tmp_path, "train.target_bucket=4")


def test_unknown_batch_by_is_a_config_error(small_data, tmp_path):
    with pytest.raises(ConfigError, match="train.batch_by: 'source' is not one of longer, target"):
        make_trainer(small_data, tmp_path, "train.batch_by=source")



def test_a_run_keeps_its_data_yaml_and_loads_its_vocabularies_from_it(trained_run, small_data, tmp_path):
    data_meta, run_meta = DataMeta.load(small_data), DataMeta.load(trained_run)
    assert run_meta.joint_vocab == data_meta.joint_vocab and run_meta.splits == data_meta.splits
    assert (run_meta.src_vocab, run_meta.tgt_vocab) == ("vocab/src.model", "vocab/tgt.model")
    sentences = ["a b c", "d e"]
    expected = api.load_run(trained_run, "last").translate(sentences, beam_size=2)
    old_run = tmp_path / "old"  # a run saved before runs kept data.yaml: the same, read from its vocab/ files
    shutil.copytree(trained_run, old_run)
    (old_run / "data.yaml").unlink()
    assert api.run_data_meta(old_run) == dataclasses.replace(run_meta, src_lang="", tgt_lang="", splits={}, fields={})
    assert api.load_run(old_run, "last").translate(sentences, beam_size=2) == expected
    (trained_run / "data.yaml").rename(tmp_path / "kept.yaml")  # load_run reads the paths data.yaml names
    try:
        text = (tmp_path / "kept.yaml").read_text().replace("vocab/tgt.model", "vocab/missing.model")
        (trained_run / "data.yaml").write_text(text)
        with pytest.raises(InputError, match="missing.model"):
            api.load_run(trained_run, "last")
    finally:
        (tmp_path / "kept.yaml").replace(trained_run / "data.yaml")
