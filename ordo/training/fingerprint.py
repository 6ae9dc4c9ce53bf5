"""A cheap fingerprint of the training split an epoch reads, kept in every checkpoint, so that a run resumed
part-way through an epoch can tell whether the prepared data changed in place since (prepared again with other
settings, or another corpus in the same folder).

A checkpoint's place in its epoch is an index into a list of batches that the seed builds from the rows' lengths;
other rows give another list, and the index then points at other sentences. The fingerprint is what that list is
built from: per side, the number of rows and tokens and a SHA-256 of the row offsets (the ``.idx`` file, 8 bytes a
row, already in memory), never the tokens themselves, so it costs a fraction of a second on millions of pairs. The
same data prepared again (byte for byte the same, as ``ordo prepare`` makes it), copied or moved has the same
fingerprint; another corpus whose every row has the same length as the old one's is not told apart.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from ordo.data.corpus import ParallelData, TokenArray

SIDES = ("src", "tgt")


def side_fingerprint(array: TokenArray) -> dict[str, Any]:
    """``rows``, ``tokens`` and ``offsets_sha256`` (SHA-256 of the little-endian int64 row offsets) of ``array``."""
    offsets = np.ascontiguousarray(array.offsets, dtype="<i8")
    return {"rows": len(array), "tokens": int(offsets[-1]), "offsets_sha256": hashlib.sha256(offsets.data).hexdigest()}


def split_fingerprint(data: ParallelData) -> dict[str, dict[str, Any]]:
    """:func:`side_fingerprint` of the source and target of ``data``, by side."""
    return {"src": side_fingerprint(data.src), "tgt": side_fingerprint(data.tgt)}


def fingerprint_changes(saved: dict[str, dict[str, Any]], now: dict[str, dict[str, Any]], split: Path) -> list[str]:
    """What differs between the fingerprint ``saved`` in a checkpoint and the one of the data ``now``, a phrase
    per side, naming ``split`` (the split's path without ``.src``/``.tgt``): ``PATH.src: 1500 rows, 20000 tokens ->
    1400 rows, 18000 tokens``, or ``PATH.src: other row lengths (1500 rows, 20000 tokens)`` when only the offsets
    differ. Empty when the data is unchanged, or ``saved`` is empty (a checkpoint written before it was kept)."""
    changes = []
    for side in SIDES if saved else ():
        before, after = saved[side], now[side]
        if before == after:
            continue
        counts = f"{after['rows']} rows, {after['tokens']} tokens"
        if (before["rows"], before["tokens"]) != (after["rows"], after["tokens"]):
            changes.append(f"{split}.{side}: {before['rows']} rows, {before['tokens']} tokens -> {counts}")
        else:
            changes.append(f"{split}.{side}: other row lengths ({counts})")
    return changes
