"""Token-based batching with length bucketing, and collation of rows into a padded :class:`Batch`.

A batch holds as many sentences as fit in ``max_tokens`` counting padding (the longest side of the longest
pair times the number of pairs). The batch list of an epoch is a pure function of (lengths, seed, epoch),
so a resumed run rebuilds it and continues at the saved position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from ordo.data.batch import BOS_ID, EOS_ID, PAD_ID, Batch


def batch_by_tokens(sizes: np.ndarray, order: np.ndarray, max_tokens: int) -> list[np.ndarray]:
    """Cut ``order`` (indices sorted by size) into consecutive batches whose padded size fits ``max_tokens``.

    A single item larger than ``max_tokens`` becomes a batch of its own rather than being dropped.
    """
    batches: list[np.ndarray] = []
    start, longest = 0, 0
    for position, index in enumerate(order):
        size = int(sizes[index])
        new_longest = max(longest, size)
        if position > start and new_longest * (position - start + 1) > max_tokens:
            batches.append(order[start:position])
            start, new_longest = position, size
        longest = new_longest
    if start < len(order):
        batches.append(order[start:])
    return batches


def index_dtype(count: int) -> type[np.signedinteger]:
    """The narrowest signed integer type that indexes ``count`` items: int32 below 2**31 (a corpus of millions of
    pairs keeps its epoch's order in 4 bytes a pair rather than 8), else int64."""
    return np.int32 if count < 2**31 else np.int64


def epoch_batches(
    src_lengths: np.ndarray,
    tgt_lengths: np.ndarray | None,
    max_tokens: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    bucket_width: int = 0,
    sort_within: np.ndarray | None = None,
) -> list[np.ndarray]:
    """The batches of one epoch: bucketed by length, with a shuffled order when ``shuffle``.

    Args:
        src_lengths, tgt_lengths: pieces per sentence (without EOS/BOS), (N,) each; tgt may be None.
        max_tokens: padded tokens per batch (the larger side counts).
        seed, epoch: determine the order of pairs of the same lengths and the batch order.
        bucket_width: 0 sorts by size, pairs of one size by target length and then source length (so that
            neither side pads much: a Ja-En epoch at 3,000 tokens pads 3.8% of target positions instead of the
            29.9% of size-only sorting); N > 0 sorts by size rounded down to multiples of N, then by
            ``sort_within``, so a batch pads that other quantity less (at the cost of padding its size a little).
        sort_within: (N,) the secondary sort key, e.g. source lengths when batches are sized by target.

    Returns:
        Arrays of sentence indices, one per batch.
    """
    sizes = src_lengths + 1 if tgt_lengths is None else np.maximum(src_lengths, tgt_lengths) + 1
    if not shuffle:
        return batch_by_tokens(sizes, np.argsort(sizes, kind="stable"), max_tokens)
    rng = np.random.default_rng([seed, epoch])
    permutation = rng.permutation(len(sizes)).astype(index_dtype(len(sizes)))  # the same order in half the bytes
    if bucket_width > 0 and sort_within is not None:
        order = permutation[np.lexsort((sort_within[permutation], sizes[permutation] // bucket_width))]
    elif tgt_lengths is not None:  # pairs of one size by target, then source length: both sides pad little
        order = permutation[np.lexsort((src_lengths[permutation], tgt_lengths[permutation], sizes[permutation]))]
    else:
        order = permutation[np.argsort(sizes[permutation], kind="stable")]
    batches = batch_by_tokens(sizes, order, max_tokens)
    return [batches[i] for i in rng.permutation(len(batches))]


def pad_rows(
    rows: Sequence[np.ndarray], prefix: int | None = None, suffix: int | None = None, multiple: int = 1
) -> torch.Tensor:
    """Stack int rows into (B, L) padded with PAD_ID, adding an optional first and last token to each; L is
    rounded up to a multiple of ``multiple``."""
    extra = (prefix is not None) + (suffix is not None)
    width = -(-(max(len(r) for r in rows) + extra) // multiple) * multiple
    out = np.full((len(rows), width), PAD_ID, dtype=np.int64)
    for i, row in enumerate(rows):
        start = 1 if prefix is not None else 0
        if prefix is not None:
            out[i, 0] = prefix
        out[i, start : start + len(row)] = row
        if suffix is not None:
            out[i, start + len(row)] = suffix
    return torch.from_numpy(out)


def collate(
    indices: np.ndarray,
    src_rows: Sequence[np.ndarray],
    tgt_rows: Sequence[np.ndarray] | None = None,
    field_rows: Mapping[str, Sequence[np.ndarray]] | None = None,
    pad_multiple: int = 1,
) -> Batch:
    """Build a :class:`Batch`: source = pieces + EOS; tgt_in = BOS + pieces; tgt_out = pieces + EOS.

    Per-token fields are padded like the source, with 0 at the EOS slot and at padding. Both sides' lengths are
    rounded up to a multiple of ``pad_multiple`` (``train.pad_multiple``: batch shapes repeat, as CUDA graphs
    want); the extra positions are padding, which attention masks and the loss skips.
    """
    src_tokens = pad_rows(src_rows, suffix=EOS_ID, multiple=pad_multiple)  # (B, S)
    src_lengths = torch.tensor([len(r) + 1 for r in src_rows], dtype=torch.long)
    tgt_in = tgt_out = None
    if tgt_rows is not None:
        tgt_in = pad_rows(tgt_rows, prefix=BOS_ID, multiple=pad_multiple)  # (B, T)
        tgt_out = pad_rows(tgt_rows, suffix=EOS_ID, multiple=pad_multiple)  # (B, T)
    fields = {name: pad_rows(rows, suffix=0, multiple=pad_multiple) for name, rows in (field_rows or {}).items()}
    return Batch(src_tokens, src_lengths, torch.from_numpy(np.asarray(indices, dtype=np.int64)), tgt_in, tgt_out, fields)
