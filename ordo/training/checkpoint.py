"""Training's housekeeping of its checkpoint folder: rotation (the newest ``keep_last``, evenly spaced for
averaging) and the temporary files of saves a kill interrupted. The checkpoint files themselves (saving,
loading, averaging) are :mod:`ordo.checkpoint`."""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

from ordo.checkpoint import step_checkpoints

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
