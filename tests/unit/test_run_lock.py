"""One training at a time in a run directory: a second one stops at once naming the first, which it leaves alone;
the lock of a killed process is taken over; under torchrun rank 0 alone takes it."""

import os
import socket
import subprocess
import sys

import pytest
import torch

from ordo import api
from ordo.checkpoint import load_checkpoint, step_checkpoints
from ordo.cli import main
from ordo.config import load_config
from ordo.training.lock import LOCK_NAME, RunLocked, run_lock, training_holder
from ordo.training.trainer import Trainer

TINY = ["model.preset=tiny", "model.d_model=16", "model.ffn_dim=32", "train.max_tokens=300", "train.warmup_steps=5",
        "train.progress=false", "train.valid_bleu=false", "train.threads=1", "train.device=cpu", "train.max_steps=2",
        "train.valid_every=2"]

HOLD = """
import sys, time
from pathlib import Path
from ordo.training.lock import run_lock
with run_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(600)
"""


def config(data):
    return load_config(None, [f"data={data}", *TINY])


def snapshot(run):
    """Every file under ``run`` with its bytes."""
    return {path.relative_to(run): path.read_bytes() for path in sorted(run.rglob("*")) if path.is_file()}


def test_a_second_training_of_a_locked_run_stops_at_once_and_changes_nothing(small_data, tmp_path, capsys):
    """Before, a second `ordo train --out RUN` trained alongside the first, both writing RUN's checkpoints."""
    run = tmp_path / "run"
    api.train(config(small_data), run)
    with run_lock(run):  # as a first `ordo train` holds it while it trains
        before = snapshot(run)
        args = ["train", "--data", str(small_data), "--out", str(run), "--set", "train.max_steps=4"]
        assert main(args) == 2
        error = capsys.readouterr().err
        assert snapshot(run) == before
    holder = f"pid {os.getpid()} on host {socket.gethostname()}"
    assert f"ordo train: error: {run}: another training is running in this run directory ({holder}" in error


def test_a_fresh_run_dir_being_trained_is_not_written_by_a_second_start(small_data, tmp_path):
    run = tmp_path / "run"
    with run_lock(run), pytest.raises(RunLocked, match=rf"{run}: another training .* \(pid {os.getpid()} "):
        api.train(config(small_data), run)
    assert sorted(path.name for path in run.iterdir()) == [LOCK_NAME]  # no config.yaml, train.log, checkpoints


def test_the_lock_of_a_killed_process_is_taken_over(small_data, tmp_path):
    """flock: the kernel releases the lock of a process that dies, however it dies; the file stays behind."""
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(RunLocked, match=f"pid {holder.pid} on host {socket.gethostname()}"):
            api.train(config(small_data), run)
    finally:
        holder.kill()  # SIGKILL: no clean-up of its own
        holder.wait()
    assert (run / LOCK_NAME).is_file()
    assert api.train(config(small_data), run).step == 2
    assert load_checkpoint(step_checkpoints(run / "checkpoints")[-1])["progress"]["step"] == 2
    assert f"pid {os.getpid()} " in (run / LOCK_NAME).read_text()


def test_under_torchrun_only_rank_0_takes_the_lock(small_data, tmp_path, monkeypatch):
    """The processes of one torchrun job share the run; rank 0 alone writes it, and alone locks it (the others
    would otherwise find it locked by rank 0). Here rank 1 starts while the run is locked, as rank 0 holds it."""
    run = tmp_path / "run"
    monkeypatch.setenv("RANK", "1")  # WORLD_SIZE unset: one process, no process group, but not rank 0
    monkeypatch.setattr(Trainer, "train", lambda self: self.progress)  # alone, rank 1 would never stop
    with run_lock(run):
        assert api.train(config(small_data), run).step == 0
    monkeypatch.setenv("RANK", "0")
    with run_lock(run), pytest.raises(RunLocked):
        api.train(config(small_data), run)


def test_a_run_dir_that_cannot_be_created_is_an_error_naming_it(small_data, tmp_path, capsys):
    """Before, `--out` below a file stopped with a NotADirectoryError traceback from the lock's mkdir."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    args = ["train", "--data", str(small_data), "--out", str(blocker / "run"), *[arg for s in TINY for arg in ("--set", s)]]
    assert main(args) == 2
    assert f"ordo train: error: {blocker / 'run'}: cannot be created (Not a directory)" in capsys.readouterr().err


def test_averaging_a_run_being_trained_warns_naming_the_training_and_leaves_its_lock(tmp_path, caplog):
    """Before, `ordo average` on a run still training averaged a moving window of checkpoints without a word."""
    checkpoints = tmp_path / "run" / "checkpoints"
    checkpoints.mkdir(parents=True)
    for step in (1, 2):
        torch.save({"model": {"w": torch.full((2,), float(step))}}, checkpoints / f"step_{step}.pt")
    api.average(tmp_path / "run", 2)
    assert "still training" not in caplog.text
    with run_lock(tmp_path / "run"):
        with caplog.at_level("WARNING", logger="ordo"):
            api.average(tmp_path / "run", 2)
        assert training_holder(tmp_path / "run").startswith(f"pid {os.getpid()} on host")
    assert f"{tmp_path / 'run'} is still training (pid {os.getpid()} on host" in caplog.text
    assert "its 2 newest checkpoints so far, up to step_2.pt" in caplog.text
    assert training_holder(tmp_path / "run") is None  # the shared try let go: a new training may take it
    with run_lock(tmp_path / "run"):
        pass
