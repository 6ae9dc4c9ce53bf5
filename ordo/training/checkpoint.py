"""Training's housekeeping of its checkpoint folder: which checkpoint a run resumes from, ``best.pt`` mended
after a cut-short save, weights copied from another run (``train.init_from``), rotation (the newest
``keep_last``, evenly spaced for averaging) and the temporary files of saves a kill interrupted. The
checkpoint files themselves (saving, loading, averaging) are :mod:`ordo.checkpoint`."""

from __future__ import annotations

import logging
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ordo.checkpoint import BEST_NAME, load_checkpoint, save_checkpoint, step_checkpoints
from ordo.errors import CheckpointError

logger = logging.getLogger("ordo.train")

# the temporary files atomic_write (ordo.data.textio) leaves when a save of step_N.pt or best.pt is killed
TEMP_PATTERN = re.compile(r"^\.(step_\d+|best)\.pt\.\w+\.tmp$")


def remove_stale_temporaries(directory: str | Path) -> list[Path]:
    """Delete the temporary files that saves of ``step_N.pt`` or ``best.pt`` killed mid-write left in
    ``directory`` (``.step_N.pt.XXXX.tmp``); returns the paths removed."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    stale = sorted(p for p in directory.iterdir() if TEMP_PATTERN.match(p.name))
    for path in stale:
        path.unlink()
    return stale


def prune_checkpoints(directory: str | Path, keep_last: int, off_grid: Collection[Path] = ()) -> None:
    """Delete the checkpoints ``off_grid`` (saved off the ``valid_every`` grid: when a signal stopped a run, or at
    its end) unless one is the newest, so that the kept ones stay evenly spaced for averaging; then all but the
    newest ``keep_last``. Which checkpoints are off the grid is the caller's record, not a multiple of today's
    ``valid_every``: a run resumed with another ``valid_every`` keeps the checkpoints of its old grid."""
    older = {path.name: path for path in step_checkpoints(directory)[:-1]}
    for path in off_grid:
        if path.name in older:
            older[path.name].unlink()
    for path in step_checkpoints(directory)[:-keep_last] if keep_last > 0 else []:
        path.unlink()


def pick_checkpoint(directory: Path, device: torch.device) -> tuple[Path | None, dict[str, Any] | None, str | None]:
    """Where a run with checkpoints in ``directory`` resumes: ``(path, state, None)`` for the newest readable
    ``step_N.pt`` (loaded onto ``device``), warning about each newer one that cannot be read; ``(None, None,
    None)`` when there is none, and ``(None, None, message)`` when none can be read, or when ``best.pt`` is there
    without them (a fresh start would overwrite it). First removes temporary files of killed saves."""
    for stale in remove_stale_temporaries(directory):
        logger.warning("removed %s, left by a checkpoint save that was killed", stale)
    checkpoints = step_checkpoints(directory)
    best = directory / BEST_NAME
    if not checkpoints and best.is_file():
        return None, None, (f"{best}: the run has no step_N.pt to resume from, and training afresh would "
                            f"overwrite it; train a new run dir, with --set train.init_from={best} to start "
                            "from its weights")
    for path in reversed(checkpoints):
        try:
            return path, load_checkpoint(path, map_location=device), None
        except CheckpointError as err:
            logger.warning("%s; falling back to the checkpoint before it", err)
    if checkpoints:
        return None, None, f"{directory}: none of its {len(checkpoints)} step_N.pt checkpoints can be read"
    return None, None, None


def restore_best(directory: Path, state: dict[str, Any], path: Path) -> None:
    """Make ``best.pt`` in ``directory`` the resumed checkpoint ``state`` (read from ``path``), whose validation
    was the best so far, when it holds another update: a run killed between saving ``step_N.pt`` and
    ``best.pt`` would otherwise go on with N counted as the best and an older model in ``best.pt``, never to
    replace it unless a later validation beats N."""
    best = directory / BEST_NAME
    try:
        held = load_checkpoint(best, mmap=True)["progress"]["step"]
    except (CheckpointError, KeyError):
        held = None
    if held == state["progress"]["step"]:
        return
    logger.warning("%s holds %s, but the best validation so far is that of %s (a save was cut short): "
                   "writing it again", best, f"update {held}" if held is not None else "no checkpoint", path)
    save_checkpoint(state, best)


def initialise_from(model: nn.Module, path: Path, device: torch.device) -> None:
    """Copy the weights of another run's checkpoint ``path`` into the fresh ``model`` (e.g. RNNsearch* before
    distortion training, paper 003's Table 5); parameters it lacks keep their initialisation (the optimizer
    starts afresh)."""
    weights = load_checkpoint(path, map_location=device)["model"]
    own = model.state_dict()
    mismatched = [k for k, v in weights.items() if k in own and own[k].shape != v.shape]
    if mismatched:
        raise CheckpointError(f"{path}: shapes differ from this model for {', '.join(mismatched[:5])}")
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if unexpected:
        raise CheckpointError(f"{path}: parameters this model does not have: {', '.join(unexpected[:5])}")
    logger.info("initialised from %s; %d parameter tensors kept their own initialisation: %s", path,
                len(missing), ", ".join(missing) or "none")
