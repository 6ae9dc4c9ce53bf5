"""A run's checkpoint files: atomic saves, safe loading (``weights_only=True``), the periodic ``step_N.pt``
and ``best.pt`` found by name, and averaging. Translation reads them as much as training writes them, so they
live below ordo.training, whose rotation of a run's checkpoint folder is :mod:`ordo.training.checkpoint`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from ordo.data.textio import atomic_write
from ordo.errors import CheckpointError

STEP_PATTERN = re.compile(r"^step_(\d+)\.pt$")
BEST_NAME = "best.pt"


def save_checkpoint(state: dict[str, Any], path: str | Path) -> None:
    """``torch.save`` through :func:`atomic_write`: an interrupted save leaves the previous ``path`` intact,
    and a finished one is on disk (file and folder flushed) before this returns.

    Raises:
        CheckpointError: naming ``path`` and the reason when the save fails (a full disk); no temporary file
        is left behind.
    """
    try:
        with atomic_write(path, "wb") as handle:
            torch.save(state, handle)  # to a Python file: a failed write is an OSError with its errno
    except OSError as err:
        reason = err.strerror or str(err)
        raise CheckpointError(f"{path}: cannot save checkpoint ({reason})") from None


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu", mmap: bool = False) -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True``; with ``mmap`` its tensors are mapped from the file and read
    as they are used, so a caller that needs the model's weights alone never reads the optimizer's state (two
    more copies of the weights under Adam).

    Raises:
        CheckpointError: naming the file when it is missing, truncated or not an ordo checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
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


def average_checkpoints(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the model weights of ``paths`` (Vaswani et al. 2017, §6.1: last 5 averaged).

    Raises:
        CheckpointError: if the checkpoints do not hold the same parameters.
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    first = load_checkpoint(paths[0], mmap=True)["model"]
    total = {name: t.double() if t.is_floating_point() else t for name, t in first.items()}
    for path in paths[1:]:
        weights = load_checkpoint(path, mmap=True)["model"]
        if weights.keys() != total.keys():
            raise CheckpointError(f"{path}: parameters differ from {paths[0]}")
        for name, tensor in weights.items():
            if tensor.is_floating_point():
                total[name] += tensor.double()
    return {
        name: (t / len(paths)).to(first[name].dtype) if t.is_floating_point() else t for name, t in total.items()
    }
