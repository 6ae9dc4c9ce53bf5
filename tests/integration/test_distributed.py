"""Training through torchrun with DistributedDataParallel: 2 CPU processes (gloo on loopback) match one
process with the same global batch, write checkpoints from rank 0 only, and resume; an error of one process (the
run locked by another training, a checkpoint rank 0 cannot save, a train.init_from one cannot read) stops every
process at once, each saying why."""

import errno
import io
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch._dynamo  # loaded here once, not in each forked process (the optimizer needs it)

from ordo import api, run_dir
from ordo.checkpoint import BEST_NAME, load_checkpoint, save_checkpoint, step_checkpoints
from ordo.cli import main
from ordo.config import load_config
from ordo.data.corpus import DataMeta
from ordo.errors import ConfigError
from ordo.provenance import ENVIRONMENT_FILE
from ordo.training import validation as validation_module
from ordo.training.distributed import DistributedContext
from ordo.training.lock import run_lock
from ordo.training.trainer import Trainer

COMMON = ["--preset", "tiny", "--set", "model.d_model=32", "--set", "model.ffn_dim=64", "--set", "model.dropout=0",
          "--set", "train.max_tokens=300", "--set", "train.warmup_steps=5", "--set", "train.lr=2e-3",
          "--set", "train.valid_every=4", "--set", "train.progress=false", "--set", "train.valid_bleu=false",
          "--set", "train.threads=1", "--set", "train.seed=3"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ordo_train(data: Path, run: Path, steps: int, processes: int, update_freq: int) -> None:
    args = ["train", "--data", str(data), "--out", str(run), *COMMON, "--set", f"train.max_steps={steps}",
            "--set", f"train.update_freq={update_freq}"]
    if processes == 1:
        command = [sys.executable, "-m", "ordo", *args]
    else:
        torchrun = Path(sys.executable).with_name("torchrun")
        command = [str(torchrun), "--nnodes", "1", "--nproc_per_node", str(processes), "--master_addr", "127.0.0.1",
                   "--master_port", str(free_port()), "-m", "ordo", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(step_checkpoints(run / "checkpoints")[-1])["model"]


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed support")
def test_two_processes_match_one_with_the_same_global_batch_and_resume(small_data, tmp_path):
    ordo_train(small_data, tmp_path / "single", 8, processes=1, update_freq=2)
    ordo_train(small_data, tmp_path / "ddp", 8, processes=2, update_freq=1)
    single, ddp = weights(tmp_path / "single"), weights(tmp_path / "ddp")
    assert all(torch.allclose(single[k], ddp[k], atol=1e-5, rtol=1e-4) for k in single)
    single_loss = load_checkpoint(tmp_path / "single" / "checkpoints" / "step_8.pt")["valid"]["loss"]
    ddp_loss = load_checkpoint(tmp_path / "ddp" / "checkpoints" / "step_8.pt")["valid"]["loss"]
    assert ddp_loss == pytest.approx(single_loss, rel=1e-4)
    assert [p.name for p in step_checkpoints(tmp_path / "ddp" / "checkpoints")] == ["step_4.pt", "step_8.pt"]
    log = (tmp_path / "ddp" / "train.log").read_text()
    assert log.count("model: transformer") == 1  # rank 0 alone writes the log
    assert log.count("precision: ") == 1, "the log says once which precision train.amp gave"
    ordo_train(small_data, tmp_path / "ddp", 12, processes=2, update_freq=1)  # resume from step 8
    ordo_train(small_data, tmp_path / "straight", 12, processes=2, update_freq=1)
    resumed, straight = weights(tmp_path / "ddp"), weights(tmp_path / "straight")
    assert all(torch.allclose(resumed[k], straight[k], atol=1e-6) for k in resumed)
    assert "resumed from" in (tmp_path / "ddp" / "train.log").read_text()


def rank_main(rank: int, world: int, port: int, args: list[str], folder: Path) -> None:
    """``ordo ARGS`` as process ``rank`` of ``world``, with the environment torchrun gives its workers, in its own
    working folder ``folder`` (as on a machine of its own), its standard error into ``folder/stderr``."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.chdir(folder)
    os.dup2(os.open("stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115 -- the process ends in main
    main(args)


def forked_ranks(args: list[str], folder: Path, world: int = 2, timeout: float = 120) -> list[tuple[int | None, str]]:
    """``ordo ARGS`` as ``world`` processes of one gloo process group, forked from this one (seconds, where
    torchrun starts an interpreter for each), process r working in ``folder/rank{r}``: each one's exit status
    (None: still running after ``timeout`` seconds, then killed) and standard error."""
    port, fork = free_port(), multiprocessing.get_context("fork")
    folders = [folder / f"rank{rank}" for rank in range(world)]
    processes = [fork.Process(target=rank_main, args=(rank, world, port, args, folders[rank])) for rank in range(world)]
    for process, rank_folder in zip(processes, folders):
        rank_folder.mkdir(parents=True, exist_ok=True)
        process.start()
    deadline = time.monotonic() + timeout
    for process in processes:
        process.join(max(deadline - time.monotonic(), 0))
    ended = [(process.exitcode, (rank_folder / "stderr").read_text()) for process, rank_folder in zip(processes, folders)]
    for process in processes:
        process.kill()
        process.join()
    return ended


def assert_every_process_stopped_with(ended: list[tuple[int | None, str]], error: str) -> None:
    for rank, (status, stderr) in enumerate(ended):
        assert status == 2 and f"ordo train: error: {error}" in stderr, f"rank {rank} (status {status}): {stderr[-3000:]}"


def train_args(data: Path, run: Path, *sets: str) -> list[str]:
    return ["train", "--data", str(data), "--out", str(run), *COMMON, "--set", "train.device=cpu",
            *[arg for key in sets for arg in ("--set", key)]]


@pytest.fixture
def fill_disk(monkeypatch) -> Callable[[], None]:
    """A function after whose call checkpoints cannot be saved, the disk being full (tensors are still pickled in
    memory for the collective operations)."""
    save = torch.save

    def refuse(state, handle, *args, **kwargs):
        if isinstance(handle, io.BytesIO):
            return save(state, handle, *args, **kwargs)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return lambda: monkeypatch.setattr(torch, "save", refuse)


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed support")
def test_processes_share_the_validation_and_agree_with_one_process(small_data, tmp_path, monkeypatch):
    """Each process translates every second dev sentence and computes every second dev batch; the loss and BLEU in
    the checkpoint are one process's figures for the same weights. Before, every process validated the whole dev
    set: N processes took as long as one."""
    decoded = tmp_path / "decoded"
    translate = validation_module.translate_rows

    def counting(model, rows, *args, **kwargs):
        with decoded.open("a") as handle:
            handle.write(f"{os.getpid()} {len(rows)}\n")
        return translate(model, rows, *args, **kwargs)

    monkeypatch.setattr(validation_module, "translate_rows", counting)  # forked: the processes inherit it
    run = tmp_path / "run"
    sets = ("train.max_steps=4", "train.valid_bleu=true", "train.valid_max_sentences=25")
    ended = forked_ranks(train_args(small_data, run, *sets), tmp_path)
    assert [status for status, _ in ended] == [0, 0], ended[0][1][-3000:] + ended[1][1][-3000:]
    counts = [line.split() for line in decoded.read_text().splitlines()]
    assert sorted(int(n) for _, n in counts) == [12, 13] and len({pid for pid, _ in counts}) == 2
    shared = load_checkpoint(run / "checkpoints" / "step_4.pt")["valid"]
    cfg = load_config(run / "config.yaml")  # the run's own settings, in one process
    alone = Trainer(api.build_for_data(cfg, DataMeta.load(small_data)).model, cfg, run)
    alone.resume()
    valid = alone.validate()
    assert valid is not None and valid.bleu is not None and valid.bleu > 0
    assert shared["loss"] == pytest.approx(valid.loss, rel=1e-5)
    assert shared["bleu"] == pytest.approx(valid.bleu, abs=0.01)


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed support")
def test_each_process_names_itself_in_its_warnings(small_data, tmp_path):
    """Every process warns that a one-process checkpoint resumes in two; before, the lines were alike, not saying
    which process (on which machine) wrote each."""
    run = tmp_path / "run"
    assert main(train_args(small_data, run, "train.max_steps=2", "train.valid_every=2")) == 0
    ended = forked_ranks(train_args(small_data, run, "train.max_steps=4", "train.valid_every=2"), tmp_path)
    for rank, (status, stderr) in enumerate(ended):
        assert status == 0, stderr[-3000:]
        assert f"| rank {rank} | ordo.train | the checkpoint was saved by 1 processes, this run has 2" in stderr


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed support")
def test_a_locked_run_stops_every_process_at_once_with_the_error(small_data, tmp_path):
    """Before, rank 0 alone took the lock and stopped; the others waited for it in the process group's set-up,
    until torchrun's timeout (on another machine, whose torchrun does not see rank 0 end), not saying why."""
    run = tmp_path / "run"
    with run_lock(run):  # as another training's rank 0 holds it
        ended = forked_ranks(train_args(small_data, run, "train.max_steps=2"), tmp_path)
    assert_every_process_stopped_with(ended, f"{run}: another training is running in this run directory (pid "
                                             f"{os.getpid()} ")
    assert sorted(path.name for path in run.iterdir()) == ["train.lock"]


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed support")
def test_a_checkpoint_rank_0_cannot_save_stops_every_process_with_its_error(small_data, tmp_path, fill_disk):
    """Before, rank 0 (which alone saves) stopped with the error and the others went on into the next update's
    collective operation, which failed in gloo with a traceback saying nothing of the disk (and waits for NCCL's
    timeout on GPUs)."""
    fill_disk()
    run = tmp_path / "run"
    ended = forked_ranks(train_args(small_data, run, "train.max_steps=4", "train.valid_every=2"), tmp_path)
    assert_every_process_stopped_with(ended, f"{run / 'checkpoints' / 'step_2.pt'}: cannot save checkpoint (No "
                                             "space left on device)")


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed support")
def test_a_best_pt_rank_0_cannot_mend_on_resume_stops_every_process_with_its_error(small_data, tmp_path, fill_disk):
    """The same for ``best.pt``, which rank 0 writes again on resuming when a kill cut its save short."""
    run = tmp_path / "run"
    assert main(train_args(small_data, run, "train.max_steps=2", "train.valid_every=2")) == 0
    best = run / "checkpoints" / BEST_NAME
    best.unlink()  # as a kill between the saves of step_2.pt and best.pt leaves it: the resume writes it again
    fill_disk()
    ended = forked_ranks(train_args(small_data, run, "train.max_steps=4", "train.valid_every=2"), tmp_path)
    assert_every_process_stopped_with(ended, f"{best}: cannot save checkpoint (No space left on device)")


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed support")
def test_a_broken_environment_record_stops_every_process_with_its_error(small_data, tmp_path):
    """Rank 0 alone appends each start to RUN/environment.yaml; before, a broken file stopped it alone and the
    others went on into their first update's collective operation."""
    run = tmp_path / "run"
    run.mkdir()
    (run / ENVIRONMENT_FILE).write_text("not: a list\n")
    ended = forked_ranks(train_args(small_data, run, "train.max_steps=2"), tmp_path)
    assert_every_process_stopped_with(ended, f"{run / ENVIRONMENT_FILE}: expected a list of records")


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed support")
def test_init_from_that_one_process_cannot_read_stops_every_process_naming_it(small_data, tmp_path):
    """Before, the process that could not read it stopped, not saying which it was, and the others went on into
    their first update's collective operation. Here the relative path names a file in rank 0's folder only, as a
    file on one machine's disk."""
    cfg = load_config(None, [f"data={small_data}", "model.preset=tiny", "model.d_model=32", "model.ffn_dim=64"])
    (tmp_path / "rank0").mkdir()
    save_checkpoint({"model": api.build_for_data(cfg, DataMeta.load(small_data)).model.state_dict()},
                    tmp_path / "rank0" / "init.pt")
    ended = forked_ranks(train_args(small_data, tmp_path / "run", "train.max_steps=2", "train.init_from=init.pt"),
                         tmp_path)
    assert_every_process_stopped_with(ended, "rank 1: init.pt: no such checkpoint (every process reads "
                                             "train.init_from: on several machines it must be at that path on each)")


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed support")
def test_run_files_rank_0_cannot_write_stop_every_process_with_its_error(small_data, tmp_path):
    """Rank 0 alone writes the run's config and its copy of the vocabularies; before, a write it could not make
    stopped it alone and the others went on into the trainer's first collective operation."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "vocab").write_text("a file where the run's vocabulary folder goes\n")
    ended = forked_ranks(train_args(small_data, run, "train.max_steps=2"), tmp_path)
    assert_every_process_stopped_with(ended, f"{run / 'vocab' / 'src.model'}: cannot")


def test_a_disk_that_refuses_the_run_files_is_an_error_naming_the_run(small_data, tmp_path, monkeypatch, capsys):
    """A write that fails mid-file (a full disk) is an error naming the run directory, not a traceback."""
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(run_dir, "save_config", full)
    run = tmp_path / "run"
    assert main(train_args(small_data, run, "train.max_steps=2")) == 2
    assert f"ordo train: error: {run}: cannot write the run's files (No space left on device)" in capsys.readouterr().err
    assert not (run / "checkpoints").exists()


def test_one_gpu_of_several_for_several_processes_is_refused(monkeypatch):
    """``train.device=cuda:1`` under torchrun would put every process on that GPU (NCCL refuses, or they share
    it): refused before the process group is joined, saying what to write instead."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    with pytest.raises(ConfigError, match=r"train.device cuda:1: torchrun started 2 processes.*use cuda or auto"):
        DistributedContext("cuda:1")
