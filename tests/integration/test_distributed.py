"""Training through torchrun with DistributedDataParallel: 2 CPU processes (gloo on loopback) match one
process with the same global batch, write checkpoints from rank 0 only, and resume."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ordo.checkpoint import load_checkpoint, step_checkpoints

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
