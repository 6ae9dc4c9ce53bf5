"""Contrastive word-order probes: does a model prefer each reference to the same words in a wrong order?

Each test reference gets one variant of each kind, made from its whitespace words:

- ``swap``: two adjacent words exchanged (local order);
- ``move``: one word moved at least :data:`MOVE_DISTANCE` slots away (long-distance order);
- ``reverse``: the words in reverse order.

A kind that cannot change a sentence (too few words, or words all alike) leaves that pair out of the kind. The
model scores the reference and its variant by forced decoding (log P(y | x), :meth:`ordo.api.LoadedRun.score`)
and ranks the pair right when the reference scores strictly higher: a contrastive test set in the manner of
Sennrich (2017, "How grammatical is character-level neural machine translation?", LingEval97) and Burlot & Yvon
(2017), here on the test set's own references. Per system and kind: the share ranked right with its Wilson 95%
interval, the mean log-probability margin of the reference over its variant, and against the first system
McNemar's exact test on the pairs the two systems rank differently.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import binomtest

from ordo.api import LoadedRun
from ordo.evaluation.significance import sign_test_p_value

KINDS = ("swap", "move", "reverse")
MOVE_DISTANCE = 3  # ``move`` takes a word at least this many slots away


def swap_adjacent(words: Sequence[str], rng: random.Random) -> list[str] | None:
    """``words`` with one random pair of unequal neighbours exchanged; None when there is none."""
    places = [i for i in range(len(words) - 1) if words[i] != words[i + 1]]
    if not places:
        return None
    here = rng.choice(places)
    swapped = list(words)
    swapped[here], swapped[here + 1] = swapped[here + 1], swapped[here]
    return swapped


def move_far(words: Sequence[str], rng: random.Random) -> list[str] | None:
    """``words`` with one random word taken out and put back at least :data:`MOVE_DISTANCE` slots away (another
    order of the same words); None when no such move changes the sentence."""
    moves = [(start, end) for start in range(len(words)) for end in range(len(words))
             if abs(end - start) >= MOVE_DISTANCE]
    rng.shuffle(moves)
    for start, end in moves:
        moved = list(words)
        moved.insert(end, moved.pop(start))
        if moved != list(words):
            return moved
    return None


def reverse_words(words: Sequence[str], _rng: random.Random) -> list[str] | None:
    """``words`` in reverse order; None when that is the same sentence."""
    reversed_words = list(words)[::-1]
    return reversed_words if reversed_words != list(words) else None


VARIANTS = {"swap": swap_adjacent, "move": move_far, "reverse": reverse_words}


def word_order_variants(refs: Sequence[str], kind: str, seed: int = 1) -> list[str | None]:
    """Each reference's variant of ``kind`` (a string of its words reordered, or None where the kind cannot
    change it), reproducibly for a ``seed``."""
    rng = random.Random(f"{seed}:{kind}")
    variants = [VARIANTS[kind](ref.split(), rng) for ref in refs]
    return [None if words is None else " ".join(words) for words in variants]


@dataclass(frozen=True)
class ProbeResult:
    """One system's ranking of the pairs of one kind: which ranked the reference first (by test pair) and by
    how much (log-probability of the reference minus its variant's)."""

    name: str
    kind: str
    right: dict[int, bool]  # test pair -> whether the reference scored strictly higher
    margins: dict[int, float]

    @property
    def accuracy(self) -> float:
        """The share of pairs ranked right."""
        return sum(self.right.values()) / len(self.right)

    @property
    def interval(self) -> tuple[float, float]:
        """Wilson's 95% interval of :attr:`accuracy`."""
        found = binomtest(sum(self.right.values()), len(self.right)).proportion_ci(method="wilson")
        return float(found.low), float(found.high)

    def mcnemar_p(self, other: ProbeResult) -> float:
        """McNemar's exact two-sided p of this system's ranking against ``other``'s on the same pairs: the sign
        test of the pairs only one of the two ranks right."""
        only_self = sum(self.right[i] and not other.right[i] for i in self.right)
        only_other = sum(other.right[i] and not self.right[i] for i in self.right)
        return sign_test_p_value(only_self, only_other)


def probe(run: LoadedRun, name: str, sources: list[str], refs: list[str], variants: dict[str, list[str | None]],
          files: tuple[str, str] = ("source", "reference")) -> list[ProbeResult]:
    """``run`` (called ``name``) ranking every reference against each kind's variant (:func:`word_order_variants`;
    a kind that changes no reference gives no result); ``files`` name the test files in errors."""
    ref_scores = [score.log_prob for score in run.score(sources, refs, files=files)]
    results = []
    for kind, texts in variants.items():
        pairs = [index for index, text in enumerate(texts) if text is not None]
        if not pairs:
            continue
        scores = run.score([sources[i] for i in pairs], [texts[i] or "" for i in pairs],
                           files=(files[0], f"{files[1]} ({kind})"))
        margins = {index: ref_scores[index] - score.log_prob for index, score in zip(pairs, scores)}
        results.append(ProbeResult(name, kind, {index: margin > 0 for index, margin in margins.items()}, margins))
    return results


def probe_rows(results: Sequence[ProbeResult]) -> list[list[str | int | float | None]]:
    """Table rows (:data:`PROBE_HEADERS`) of every system's results, each kind against the first system's."""
    baseline = {result.kind: result for result in results if result.name == results[0].name}
    rows: list[list[str | int | float | None]] = []
    for result in results:
        low, high = result.interval
        against = baseline[result.kind]
        rows.append([result.name, result.kind, len(result.right), 100 * result.accuracy,
                     f"[{100 * low:.1f}, {100 * high:.1f}]", statistics.fmean(result.margins.values()),
                     None if against is result else f"{result.mcnemar_p(against):.3g}"])
    return rows


PROBE_HEADERS = ["system", "variant", "pairs", "reference preferred (%)", "95% interval", "mean margin (nats)",
                 "p vs first system (McNemar)"]
