"""Test sentences grouped by source length (paper 004, §5.4), and scores per group."""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

LENGTH_UNITS = ("words", "chars")  # how a source's length is counted


def source_lengths(sources: Sequence[str], unit: str = "words") -> list[int]:
    """The length of every source in ``words`` (whitespace tokens) or ``chars`` (characters other than
    whitespace: the unit for unsegmented Chinese or Japanese).

    Raises:
        ValueError: for another unit.
    """
    if unit not in LENGTH_UNITS:
        raise ValueError(f"length unit {unit!r}: expected one of {', '.join(LENGTH_UNITS)}")
    return [len(s.split()) if unit == "words" else len("".join(s.split())) for s in sources]


@dataclass
class LengthGroup:
    """Sentences whose source length (words) lies in ``[low, high]``."""

    low: int
    high: int
    indices: list[int]

    @property
    def label(self) -> str:
        """``"low-high"``, or one number when the group holds a single length."""
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


def quantile_bounds(lengths: Sequence[int], groups: int) -> list[int]:
    """Upper bounds that cut ``lengths`` into ``groups`` groups of about equal size (fewer if lengths repeat)."""
    if groups < 1:
        raise ValueError(f"need at least one group, got {groups}")
    cuts = np.quantile(np.asarray(lengths), [k / groups for k in range(1, groups)], method="lower")
    return sorted({int(c) for c in cuts})


def group_by_length(lengths: Sequence[int], bounds: Sequence[int]) -> list[LengthGroup]:
    """Groups ``(.., b1], (b1, b2], .., (bk, ..)`` of sentence indices by length; empty groups are dropped."""
    edges = sorted(set(bounds))
    members: dict[int, list[int]] = defaultdict(list)
    for index, length in enumerate(lengths):
        members[bisect_left(edges, length)].append(index)
    return [
        LengthGroup(min(lengths[i] for i in indices), max(lengths[i] for i in indices), indices)
        for _, indices in sorted(members.items())
    ]


def score_groups(
    groups: Sequence[LengthGroup], hyps: Sequence[str], refs: Sequence[str],
    metric: Callable[[list[str], list[str]], float],
) -> list[float]:
    """``metric`` (corpus BLEU) of each group's hypotheses against its references."""
    return [metric([hyps[i] for i in g.indices], [refs[i] for i in g.indices]) for g in groups]
