"""Contrastive word-order probes: does a model prefer each reference to the same words in a wrong order?

Each test reference gets one variant of each kind, made from its whitespace words:

- ``swap``: two adjacent words exchanged (local order);
- ``move``: one word moved at least :data:`MOVE_DISTANCE` slots away (long-distance order);
- ``reverse``: the words in reverse order;
- ``source-order`` (with the test pairs' word alignment): the words in the order of the source words they align
  to, the word-by-word order of a translation that does not reorder (:func:`source_ordered`).

The random kinds are easy for a trained model (a reference's words reversed are rarely fluent); the source-order
variant is the error a weak reordering model makes, often fluent, and exists only for the reordered pairs.
A kind that cannot change a sentence (too few words, or words all alike) leaves that pair out of the kind. The
model scores the reference and its variant by forced decoding (log P(y | x), :meth:`ordo.api.LoadedRun.score`)
and ranks the pair right when the reference scores strictly higher: a contrastive test set in the manner of
Sennrich (2017, "How grammatical is character-level neural machine translation?", LingEval97) and Burlot & Yvon
(2017), here on the test set's own references. Per system and kind: the share ranked right with its Wilson 95%
interval, the mean log-probability margin of the reference over its variant, and against the first system
McNemar's exact test on the pairs the two systems rank differently. McNemar's test holds the models fixed: it
says nothing of another training seed. Where a system has several runs (seeds), :func:`seed_rows` compares the
systems as the verdicts do (:class:`ordo.evaluation.seeds.SeedTest`, Student's t-test over seeds) on each run's
share ranked right and mean margin.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter

from scipy.stats import binomtest

from ordo.api import LoadedRun
from ordo.data.alignment.links import Link, split_words
from ordo.data.alignment.target_order import reorder_words, target_order
from ordo.errors import InputError
from ordo.evaluation.seeds import SeedTest
from ordo.evaluation.significance import sign_test_p_value

KINDS = ("swap", "move", "reverse")  # the random kinds, made from the reference alone
SOURCE_ORDER = "source-order"  # the kind made from the reference and its alignment to the source
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


def source_ordered(words: Sequence[str], links: Sequence[Link]) -> list[str] | None:
    """``words`` (a reference's, as :func:`ordo.data.alignment.links.split_words` splits it) placed in the order of
    the source words they align to (source, target links): paper 000's target order (§4.1,
    :func:`ordo.data.alignment.target_order.target_order`) with the two sides exchanged, so a word's key is the
    mean position of its source words and unaligned words keep their slots. None when that is ``words``' own
    order (a monotone pair)."""
    slots = target_order(len(words), [(target, source) for source, target in links])
    ordered = reorder_words(words, slots)
    return ordered if ordered != list(words) else None


def source_order_variants(refs: Sequence[str], links: Sequence[Sequence[Link]]) -> list[str | None]:
    """Each reference in its source's word order (:func:`source_ordered`), None for the monotone pairs."""
    variants = [source_ordered(split_words(ref), pair) for ref, pair in zip(refs, links, strict=True)]
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
    def percent(self) -> float:
        """:attr:`accuracy` in percent."""
        return 100 * self.accuracy

    @property
    def mean_margin(self) -> float:
        """The mean log-probability margin of the reference over its variant (nats)."""
        return statistics.fmean(self.margins.values())

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
        rows.append([result.name, result.kind, len(result.right), result.percent,
                     f"[{100 * low:.1f}, {100 * high:.1f}]", result.mean_margin,
                     None if against is result else f"{result.mcnemar_p(against):.3g}"])
    return rows


PROBE_HEADERS = ["system", "variant", "pairs", "reference preferred (%)", "95% interval", "mean margin (nats)",
                 "p vs first system (McNemar)"]


def margin_lines(results: Sequence[ProbeResult]) -> list[str]:
    """Tab-separated lines of every pair's margin (log P(reference) - log P(variant), nats) under every run: a
    header (``line``, ``variant``, the runs' names), then per kind each pair it made, by 1-based test line; a
    negative margin is a pair the run ranks wrong."""
    kinds = list(dict.fromkeys(result.kind for result in results))
    runs = list(dict.fromkeys(result.name for result in results))
    margins = {(result.name, result.kind): result.margins for result in results}
    lines = ["\t".join(["line", "variant", *runs])]
    for kind in kinds:
        pairs = sorted(margins[runs[0], kind])
        lines += ["\t".join([str(pair + 1), kind, *(f"{margins[run, kind][pair]:.4f}" for run in runs)])
                  for pair in pairs]
    return [line + "\n" for line in lines]


def _seed_comparison(base: Sequence[float], system: Sequence[float]) -> tuple[str | None, str | None]:
    """The system's mean minus the baseline's with its 95% interval, and the t-test's p (:class:`SeedTest`);
    None for both where the runs cannot measure a spread (one run a side)."""
    try:
        test = SeedTest(tuple(base), tuple(system))
    except InputError:
        return None, None
    low, high = test.interval
    return f"{test.mean_gain:+.2f} [{low:+.2f}, {high:+.2f}]", f"{test.p_value:.3g}"


def _mean_sd(values: Sequence[float]) -> str:
    """``mean (sd)`` of the runs' values; the value alone for one run."""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ({statistics.stdev(values):.2f})"


def _per_kind(results: Sequence[ProbeResult], value: Callable[[ProbeResult], float]) -> dict[str, list[float]]:
    """``value`` of each run's result, by variant kind, in run order."""
    found: dict[str, list[float]] = {}
    for result in results:
        found.setdefault(result.kind, []).append(value(result))
    return found


def seed_rows(systems: dict[str, list[ProbeResult]]) -> list[list[str | int | float | None]]:
    """Table rows (:data:`SEED_HEADERS`): per system (its runs' results, every kind; the first system is the
    comparison) and kind, the runs' share ranked right and mean margin, each as mean (sd) over runs and against
    the first system's by Student's t-test over seeds (:class:`ordo.evaluation.seeds.SeedTest`)."""
    rows: list[list[str | int | float | None]] = []
    first = next(iter(systems.values()))
    for name, results in systems.items():
        cells: dict[str, list[str | None]] = {}
        for value in (attrgetter("percent"), attrgetter("mean_margin")):
            base, own = _per_kind(first, value), _per_kind(results, value)
            for kind, values in own.items():
                against = (None, None) if results is first else _seed_comparison(base[kind], values)
                cells.setdefault(kind, []).extend([_mean_sd(values), *against])
        rows += [[name, kind, sum(result.kind == kind for result in results), *row] for kind, row in cells.items()]
    return rows


SEED_HEADERS = ["system", "variant", "runs", "reference preferred (%): mean (sd)", "vs first system [95% interval]",
                "p (t-test over seeds)", "mean margin (nats): mean (sd)", "vs first system [95% interval]",
                "p (t-test over seeds)"]
