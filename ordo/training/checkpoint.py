"""Checkpoints: atomic writes, safe loading (``weights_only=True``), rotation and averaging."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

from ordo.errors import CheckpointError

STEP_PATTERN = re.compile(r"^step_(\d+)\.pt$")
BEST_NAME = "best.pt"


def save_checkpoint(state: dict[str, Any], path: str | Path) -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename: an interrupted save loses nothing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        torch.save(state, tmp_name)
        os.replace(tmp_name, path)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True``.

    Raises:
        CheckpointError: naming the file when it is missing, truncated or not an ordo checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # noqa: BLE001 -- torch raises many types for a corrupt file
        raise CheckpointError(f"{path}: cannot read checkpoint ({type(err).__name__}: {err})") from None
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{path}: not an ordo checkpoint (no model weights)")
    return state


def step_checkpoints(directory: str | Path) -> list[Path]:
    """Periodic checkpoints ``step_N.pt`` in ``directory``, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := STEP_PATTERN.match(p.name))]
    return [p for _, p in sorted(found)]


def prune_checkpoints(directory: str | Path, keep_last: int) -> None:
    """Delete all but the newest ``keep_last`` periodic checkpoints."""
    for path in step_checkpoints(directory)[:-keep_last] if keep_last > 0 else []:
        path.unlink()


def average_checkpoints(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the model weights of ``paths`` (Vaswani et al. 2017, §6.1: last 5 averaged).

    Raises:
        CheckpointError: if the checkpoints do not hold the same parameters.
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    first = load_checkpoint(paths[0])["model"]
    total = {name: t.double() if t.is_floating_point() else t for name, t in first.items()}
    for path in paths[1:]:
        weights = load_checkpoint(path)["model"]
        if weights.keys() != total.keys():
            raise CheckpointError(f"{path}: parameters differ from {paths[0]}")
        for name, tensor in weights.items():
            if tensor.is_floating_point():
                total[name] += tensor.double()
    return {
        name: (t / len(paths)).to(first[name].dtype) if t.is_floating_point() else t for name, t in total.items()
    }
