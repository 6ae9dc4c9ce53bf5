"""Does a method help? A system against its baseline over several training seeds, by a rule fixed in advance.

One seed against one answers little: two seeds of the same baseline can differ by more than a method does, and
a sentence-level test then calls the difference significant (two Multi30k baseline seeds 0.05 BLEU apart give
sign-test p 0.0025). The rule here, ordo's verdicts (bench/RESULTS.md, "Verdicts"), measures the gain against
the baseline's own seed spread:

- "confirmed": the mean gain over the paired seeds exceeds twice the baseline's seed standard deviation, and
  every seed's gain has the same sign;
- "reversed": the mirror case (the mean loss exceeds twice the spread, and every seed loses);
- otherwise "not confirmed" (at this scale: the corpus, the budget).

Seeds are paired: the i-th system run with the i-th baseline run (the same ``train.seed``); further baseline
seeds count only in the spread. The metric is BLEU, or RIBES where the question is word order. Beside the
verdict: the two-sided paired bootstrap p of the difference over the paired seeds pooled into one test set
(sacreBLEU's for BLEU, Koehn 2004; of the sentence scores' mean for RIBES), which ignores seed variance and is
reported, not used, by the rule.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ordo.errors import InputError
from ordo.evaluation.bleu import multi_bleu, sacrebleu_bleu
from ordo.evaluation.order import corpus_ribes, ribes_tokens, sentence_ribes
from ordo.evaluation.significance import bleu_bootstrap_p, paired_bootstrap_mean

CONFIRMED, REVERSED, NOT_CONFIRMED = "confirmed", "reversed", "not confirmed at this scale"

Score = Callable[[list[str], list[str]], float]
PairedTest = Callable[[list[str], list[str], list[str]], float]


@dataclass(frozen=True)
class SeedMetric:
    """A corpus metric (``score(hyps, refs)``) and its two-sided paired test of two systems on one test set
    (``paired_p(base_hyps, system_hyps, refs)``)."""

    name: str
    score: Score
    paired_p: PairedTest


def bleu_metric(tokenized: bool = False) -> SeedMetric:
    """BLEU: multi-bleu.perl's on the tokens when ``tokenized``, else sacreBLEU's; tested with sacreBLEU's paired
    bootstrap (Koehn 2004)."""
    return SeedMetric("BLEU", multi_bleu if tokenized else sacrebleu_bleu, bleu_bootstrap_p)


def ribes_metric(tokenized: bool = False) -> SeedMetric:
    """RIBES x100 (Isozaki et al. 2010; :mod:`ordo.evaluation.order`) on the tokens as given when ``tokenized``,
    else on sacreBLEU's 13a tokens; tested with the paired bootstrap of its sentence scores' mean."""

    def score(hyps: list[str], refs: list[str]) -> float:
        return 100 * corpus_ribes(ribes_tokens(hyps, tokenized), ribes_tokens(refs, tokenized))

    def sentence_scores(hyps: list[str], refs: list[str]) -> list[float]:
        return [sentence_ribes(ref.split(), hyp.split())
                for hyp, ref in zip(ribes_tokens(hyps, tokenized), ribes_tokens(refs, tokenized))]

    def paired_p(base: list[str], system: list[str], refs: list[str]) -> float:
        return paired_bootstrap_mean(sentence_scores(base, refs), sentence_scores(system, refs))

    return SeedMetric("RIBES", score, paired_p)


def verdict(gains: Sequence[float], baseline_sd: float) -> str:
    """The rule: :data:`CONFIRMED` when the mean of ``gains`` (system minus baseline, one per paired seed)
    exceeds ``2 * baseline_sd`` and all gains are positive, :data:`REVERSED` for the mirror case, else
    :data:`NOT_CONFIRMED`."""
    mean = statistics.fmean(gains)
    if abs(mean) > 2 * baseline_sd and (all(g > 0 for g in gains) or all(g < 0 for g in gains)):
        return CONFIRMED if mean > 0 else REVERSED
    return NOT_CONFIRMED


def pooled_bootstrap_p(base_runs: Sequence[Sequence[str]], system_runs: Sequence[Sequence[str]],
                       refs: Sequence[str], indices: Sequence[int] | None = None,
                       paired_p: PairedTest = bleu_bootstrap_p) -> float:
    """The two-sided paired test ``paired_p`` (sacreBLEU's paired bootstrap of BLEU by default) of the system
    against the baseline, the paired runs (``base_runs[i]`` with ``system_runs[i]``, hypotheses of the test set)
    pooled into one test set; only the test pairs ``indices`` where given (e.g. one bucket of reordering
    difficulty)."""
    pairs = min(len(base_runs), len(system_runs))
    picked = range(len(refs)) if indices is None else indices
    base, system = ([runs[s][i] for s in range(pairs) for i in picked] for runs in (base_runs, system_runs))
    return paired_p(base, system, [refs[i] for _ in range(pairs) for i in picked])


@dataclass
class SeedComparison:
    """A system against its baseline over seeds in one metric (:func:`compare_seeds`)."""

    metric: str
    base_scores: list[float]    # every baseline seed, in order
    system_scores: list[float]  # every system seed, in order
    p_value: float              # :func:`pooled_bootstrap_p` over the paired seeds

    @property
    def gains(self) -> list[float]:
        """System minus baseline score per paired seed."""
        return [s - b for s, b in zip(self.system_scores, self.base_scores)]

    @property
    def mean_gain(self) -> float:
        """The mean of :attr:`gains`."""
        return statistics.fmean(self.gains)

    @property
    def baseline_sd(self) -> float:
        """The sample standard deviation of the baseline's score over all its seeds."""
        return statistics.stdev(self.base_scores)

    @property
    def verdict(self) -> str:
        """:func:`verdict` of the paired gains against the baseline's spread."""
        return verdict(self.gains, self.baseline_sd)


def compare_seeds(base_runs: Sequence[list[str]], system_runs: Sequence[list[str]], refs: list[str],
                  metric: SeedMetric | None = None) -> SeedComparison:
    """Score every run (test hypotheses, one list per seed) in ``metric`` (sacreBLEU's BLEU by default;
    :func:`bleu_metric` ``(tokenized=True)`` for pre-tokenized text, :func:`ribes_metric` for word order) and
    compare.

    Raises:
        InputError: fewer than two runs on either side, more system runs than baseline runs (each system
            seed needs its baseline seed), a run whose line count is not the references', or a run identical
            to another of its side (one output given twice would fake the spread).
    """
    metric = metric or bleu_metric()
    if len(base_runs) < 2 or len(system_runs) < 2:
        raise InputError(f"{len(base_runs)} baseline and {len(system_runs)} system run(s): the verdict needs at "
                         "least two seeds of each, to measure the baseline's spread and the gain's sign")
    if len(system_runs) > len(base_runs):
        raise InputError(f"{len(system_runs)} system runs for {len(base_runs)} baseline runs: each system seed "
                         "needs the baseline run of the same seed")
    for side, runs in (("baseline", base_runs), ("system", system_runs)):
        for number, hyps in enumerate(runs, 1):
            if len(hyps) != len(refs):
                raise InputError(f"{side} run {number}: {len(hyps)} lines for {len(refs)} references")
            if any(hyps == other for other in runs[:number - 1]):
                raise InputError(f"{side} run {number} is identical to an earlier {side} run: the same output "
                                 "given twice, not two seeds")
    return SeedComparison(metric.name, [metric.score(hyps, refs) for hyps in base_runs],
                          [metric.score(hyps, refs) for hyps in system_runs],
                          pooled_bootstrap_p(base_runs, system_runs, refs, paired_p=metric.paired_p))
