"""Long runs lose no work: after SIGTERM the resumed run repeats an uninterrupted one (one process; two
torchrun nodes on loopback, stopped together by a signal to one, against one node), a killed save or an
unreadable newest checkpoint falls back to the one before, a full disk is a clean error."""

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_distributed import free_port

from ordo import api
from ordo.checkpoint import load_checkpoint, step_checkpoints
from ordo.cli import main
from ordo.config import load_config
from ordo.data.corpus import DataMeta
from ordo.errors import CheckpointError
from ordo.training.distributed import DistributedContext
from ordo.training.trainer import Trainer

SETS = ["model.preset=tiny", "model.d_model=32", "model.ffn_dim=64", "model.dropout=0.3",
        "train.max_tokens=300", "train.warmup_steps=5", "train.lr=2e-3", "train.update_freq=2",
        "train.progress=false", "train.valid_bleu=false", "train.threads=1", "train.seed=7",
        "train.device=cpu"]  # on the CPU, runs repeat bit for bit


def train_command(data: Path, run: Path, steps: int, processes: int = 1, *extra: str) -> list[str]:
    """``ordo train`` (under torchrun for several processes) with SETS, ``extra`` and ``steps`` updates."""
    sets = [arg for key in [*SETS, f"train.max_steps={steps}", *extra] for arg in ("--set", key)]
    args = ["-m", "ordo", "train", "--data", str(data), "--out", str(run), *sets]
    if processes == 1:
        return [sys.executable, *args]
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    return [torchrun, "--nnodes", "1", "--nproc_per_node", str(processes), "--master_addr", "127.0.0.1",
            "--master_port", str(free_port()), *args]


def run_to_end(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=child_env(), timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def child_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def terminate_after(command: list[str], log: Path, update: int) -> tuple[int, str]:
    """Start ``command``, send it SIGTERM once ``log`` shows ``update``; its exit status and stderr."""
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=child_env())
    deadline = time.monotonic() + 300
    while not (log.exists() and f"train | update {update} " in log.read_text()):
        assert child.poll() is None, child.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the run never reached the update"
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)
    stderr = child.communicate(timeout=300)[1]
    return child.returncode, stderr


def final_weights(run: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(step_checkpoints(run / "checkpoints")[-1])["model"]


def assert_same_weights(a: Path, b: Path) -> None:
    first, second = final_weights(a), final_weights(b)
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)


def interrupted_step(run: Path) -> int:
    """The update the SIGTERM checkpoint holds (the run's only checkpoint)."""
    (checkpoint,) = step_checkpoints(run / "checkpoints")
    return load_checkpoint(checkpoint)["progress"]["step"]


def test_sigterm_saves_the_update_and_the_resumed_run_matches_an_uninterrupted_one(small_data, tmp_path):
    run = tmp_path / "resumed"
    status, stderr = terminate_after(train_command(small_data, run, 100000, 1, "train.log_every=1"),
                                     run / "train.log", 3)
    assert status == 128 + signal.SIGTERM, stderr[-3000:]
    step = interrupted_step(run)
    assert f"stopped by SIGTERM after update {step}; saved {run / 'checkpoints'}/step_{step}.pt" in stderr
    assert "stopped by SIGTERM" in (run / "train.log").read_text()
    run_to_end(train_command(small_data, run, step + 3))
    run_to_end(train_command(small_data, tmp_path / "straight", step + 3))
    assert_same_weights(run, tmp_path / "straight")
    assert not list((run / "checkpoints").glob(".*.tmp"))
    assert not (run / "checkpoints" / f"step_{step}.pt").exists()  # off the validation grid: not averaged later


def two_node_commands(data: Path, run: Path, steps: int, *extra: str) -> list[list[str]]:
    """``ordo train`` as two torchrun "nodes" of one process each, rendezvous on loopback: node 0's command, then
    node 1's."""
    port = str(free_port())
    single = train_command(data, run, steps, 1, *extra)[1:]  # the arguments after the interpreter
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    return [[torchrun, "--nnodes", "2", "--nproc_per_node", "1", "--node_rank", str(rank), "--master_addr",
             "127.0.0.1", "--master_port", port, *single] for rank in (0, 1)]


def run_nodes(commands: list[list[str]]) -> None:
    """Run the nodes' commands side by side to the end."""
    nodes = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=child_env())
             for command in commands]
    for node in nodes:
        stderr = node.communicate(timeout=600)[1]
        assert node.returncode == 0, stderr[-3000:]


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed support")
def test_two_nodes_stop_together_on_one_sigterm_and_resume_to_the_numbers_of_one_node(small_data, tmp_path):
    run = tmp_path / "resumed"
    node0, node1 = two_node_commands(small_data, run, 100000, "train.log_every=1")
    first = subprocess.Popen(node0, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=child_env())
    _, stderr = terminate_after(node1, run / "train.log", 3)  # the signal reaches node 1 alone
    first_stderr = first.communicate(timeout=300)[1]
    assert first.returncode != 0, first_stderr[-3000:]  # node 0 stopped with it, not at max_steps
    step = interrupted_step(run)
    assert f"stopped by SIGTERM after update {step}" in (run / "train.log").read_text(), stderr[-3000:]
    assert len(load_checkpoint(run / "checkpoints" / f"step_{step}.pt")["rng"]) == 2  # each one's dropout stream
    run_nodes(two_node_commands(small_data, run, step + 3))
    run_to_end(train_command(small_data, tmp_path / "straight", step + 3, 2))  # one node, two processes
    assert_same_weights(run, tmp_path / "straight")


def train_in_process(data: Path, run: Path, steps: int) -> None:
    cfg = load_config(None, [f"data={data}", *SETS, f"train.max_steps={steps}", "train.valid_every=2"])
    api.train(cfg, run)


def test_a_killed_save_and_a_truncated_newest_checkpoint_fall_back_to_the_one_before(small_data, tmp_path):
    run = tmp_path / "resumed"
    train_in_process(small_data, run, 4)
    newest = run / "checkpoints" / "step_4.pt"
    newest.write_bytes(newest.read_bytes()[:1000])  # as a power loss after an unflushed rename could leave it
    stale = run / "checkpoints" / ".step_6.pt.k3j_9x2a.tmp"  # as kill -9 while saving step_6.pt leaves it
    stale.write_bytes(b"\0" * 4096)
    train_in_process(small_data, run, 6)
    log = (run / "train.log").read_text()
    assert f"removed {stale}" in log
    assert f"{newest}: cannot read checkpoint" in log
    assert f"resumed from {run / 'checkpoints' / 'step_2.pt'}" in log
    assert not stale.exists()
    train_in_process(small_data, tmp_path / "straight", 6)
    assert_same_weights(run, tmp_path / "straight")


def test_an_unreadable_newest_checkpoint_is_named_and_none_readable_is_an_error(small_data, tmp_path, caplog):
    run = tmp_path / "run"
    train_in_process(small_data, run, 4)
    (run / "checkpoints" / "step_4.pt").write_bytes(b"not a checkpoint")
    cfg = api.run_config(run, {})
    trainer = Trainer(api.build_for_data(cfg, DataMeta.load(small_data)).model, cfg, run)
    assert trainer.resume() and trainer.progress.step == 2
    assert any("step_4.pt: cannot read checkpoint" in r.getMessage() and r.levelname == "WARNING"
               for r in caplog.records)
    (run / "checkpoints" / "step_2.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="none of its 2 step_N.pt checkpoints can be read"):
        trainer.resume()


def test_a_full_disk_ends_with_a_one_line_error_and_no_temporary_file(small_data, tmp_path, monkeypatch,
                                                                       capsys):
    def full_disk(state, handle):
        handle.write(b"the first megabytes")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full_disk)
    run = tmp_path / "run"
    sets = [arg for key in [*SETS, "train.max_steps=2", "train.valid_every=2"] for arg in ("--set", key)]
    assert main(["train", "--data", str(small_data), "--out", str(run), *sets]) == 2
    path = run / "checkpoints" / "step_2.pt"
    error = capsys.readouterr().err
    assert f"ordo train: error: {path}: cannot save checkpoint (No space left on device)" in error
    assert os.listdir(run / "checkpoints") == []  # neither step_2.pt nor its temporary file


class RankOneOfTwo(DistributedContext):
    """Rank 1 of two processes, told by rank 0 to resume from ``path``: the collectives are stand-ins."""

    def __init__(self, path: Path) -> None:
        super().__init__("cpu")
        self.rank, self.world_size, self.path = 1, 2, path

    def wrap(self, model):
        return model

    def broadcast_object(self, value):
        return (self.path, None)

    def all_reduce_max(self, value):
        return value


def test_a_process_that_cannot_see_the_checkpoint_of_rank_0_stops_with_a_clear_error(small_data, tmp_path):
    cfg = load_config(None, [f"data={small_data}", *SETS])
    model = api.build_for_data(cfg, DataMeta.load(small_data)).model
    elsewhere = tmp_path / "node0" / "checkpoints" / "step_8.pt"  # on rank 0's machine only
    trainer = Trainer(model, cfg, tmp_path / "node1", dist=RankOneOfTwo(elsewhere))
    with pytest.raises(CheckpointError, match=f"rank 1: {elsewhere}: no such checkpoint .*share"):
        trainer.resume()


def test_each_process_draws_dropout_from_a_stream_of_its_own(small_data, tmp_path):
    cfg = load_config(None, [f"data={small_data}", *SETS])
    model = api.build_for_data(cfg, DataMeta.load(small_data)).model
    torch.manual_seed(cfg.train.seed)
    rank_zero = torch.get_rng_state()
    Trainer(model, cfg, tmp_path / "run", dist=RankOneOfTwo(tmp_path / "none.pt"))
    assert not torch.equal(torch.get_rng_state(), rank_zero)
    torch.manual_seed(cfg.train.seed)
    Trainer(model, cfg, tmp_path / "run0")
    assert torch.equal(torch.get_rng_state(), rank_zero)  # rank 0, or a single process, keeps the seed's stream
