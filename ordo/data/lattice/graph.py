"""Lattices from several segmentations of one sentence (paper 002 §3), and their spans in a batch.

A segmentation is a list of token strings whose concatenation is the sentence's element sequence. Every
segmentation of one sentence must have the same concatenation. Node v_i is the gap after the i-th element
and edge e_{i:j} a token covering elements i+1..j; edges are deduplicated by (i, j, token) and ordered by
(i, j), then token.

The elements c_1..c_N are the minimum units of the K segmentations: the spans between consecutive
boundaries of any segmentation. This is what the paper uses ("character for word lattice and minimum
subword unit in our predefined subword segmentations for subword lattice", footnote of §3): with a
character segmentation among the K, the elements are the characters. A lattice of one segmentation then
has one element per token, so its edges, their order and their LPE positions are the baseline's.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import torch

from ordo.data.batch import Batch

FIELD_START = "lattice_start"  # per-edge field: start node i of e_{i:j} (0-based)
FIELD_END = "lattice_end"  # per-edge field: end node j of e_{i:j}
FIELDS = (FIELD_START, FIELD_END)


class SegmentationMismatch(ValueError):
    """Two segmentations of one sentence do not concatenate to the same element sequence."""


@dataclass
class Lattice:
    """The edges of one sentence's lattice, in encoder order.

    Attributes:
        tokens: the token of every edge.
        starts: start node i of every edge e_{i:j}.
        ends: end node j of every edge.
    """

    tokens: list[str]
    starts: list[int]
    ends: list[int]

    def __len__(self) -> int:
        """Number of edges."""
        return len(self.tokens)

    @property
    def num_nodes(self) -> int:
        """N + 1 nodes v_0..v_N for N elements (1 for an empty sentence)."""
        return max(self.ends, default=0) + 1

    def truncated(self, max_edges: int) -> Lattice:
        """The first ``max_edges`` edges (in (i, j) order, so a prefix of the sentence stays whole)."""
        return Lattice(self.tokens[:max_edges], self.starts[:max_edges], self.ends[:max_edges])


def _boundaries(tokens: list[str]) -> list[int]:
    """Element offsets 0 = b_0 < b_1 < ... of the token boundaries (character offsets in the concatenation)."""
    return [0, *accumulate(len(token) for token in tokens)]


def build_lattice(segmentations: list[list[str]]) -> Lattice:
    """Pack K segmentations of one sentence into a lattice (paper 002 §3, "Lattices").

    Args:
        segmentations: K token lists; empty tokens are not allowed.

    Returns:
        The deduplicated edges ordered by (start, end, token), spans in element (node) units.

    Raises:
        SegmentationMismatch: when two segmentations do not concatenate to the same text.
        ValueError: for an empty token.
    """
    reference = "".join(segmentations[0]) if segmentations else ""
    edges: set[tuple[int, int, str]] = set()
    for index, tokens in enumerate(segmentations):
        if "".join(tokens) != reference:
            raise SegmentationMismatch(
                f"segmentation {index + 1} covers {''.join(tokens)!r} but segmentation 1 covers {reference!r}"
            )
        if any(not token for token in tokens):
            raise ValueError(f"segmentation {index + 1} has an empty token")
        bounds = _boundaries(tokens)
        edges.update((bounds[k], bounds[k + 1], token) for k, token in enumerate(tokens))
    nodes = {offset: index for index, offset in enumerate(sorted({o for e in edges for o in e[:2]}))}
    ordered = sorted((nodes[start], nodes[end], token) for start, end, token in edges)
    return Lattice([e[2] for e in ordered], [e[0] for e in ordered], [e[1] for e in ordered])


def batch_spans(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Start and end nodes of every source token of a collated batch, EOS and padding included.

    The fields hold 0 at EOS and padding (``ordo.data.batching.collate``); EOS gets the span (N, N+1) after the
    last element of its sentence, and so does padding, which attention masks anyway.

    Shape:
        (B, S) each, int32.

    Raises:
        ValueError: when the batch lacks the ``lattice_start``/``lattice_end`` fields.
    """
    missing = [name for name in FIELDS if name not in batch.fields]
    if missing:
        raise ValueError(f"the batch has no {' and '.join(missing)} field: prepare the data with a lattice section")
    start, end = batch.fields[FIELD_START].int(), batch.fields[FIELD_END].int()  # (B, S)
    index = torch.arange(start.size(1), device=start.device)  # (S,)
    real = index[None, :] < (batch.src_lengths.to(start.device) - 1)[:, None]  # (B, S) edges, not EOS/padding
    last = end.masked_fill(~real, 0).amax(dim=1, keepdim=True)  # (B, 1) N
    return torch.where(real, start, last), torch.where(real, end, last + 1)
