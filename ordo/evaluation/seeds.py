"""Does a method help? Two systems compared over several training seeds each: a gain, its interval, and how
many seeds a claim needs.

A system's corpus score moves with its training seed: two seeds of the same baseline can differ by more than a
method does, and a sentence-level test of one seed against one then calls the difference significant. The
test here is Student's two-sample t-test of the difference in mean corpus score over the seeds of each system
(the t-test over seeds recommended by Reimers & Gurevych 2017, "Reporting score distributions makes a
difference", EMNLP), with the pooled seed variance: each seed's score carries both sources of variance a
rerun brings, the training seed and the sentence-level noise of that seed's translations of the test set, so
the spread of the scores over seeds measures both. Its power grows with the number of seeds.

How it was chosen: ``bench/seed_tests.py`` simulates experiments with normal seed noise and sentence-level
noise at ordo's measured sizes and compares this test with Welch's t-test, the multi-bootstrap (Sellam et al.
2022, "The MultiBERTs", ICLR: seeds and test sentences resampled jointly) and ordo's earlier rule ("gain beyond
twice the baseline's seed sd, the same sign on every seed"). At zero effect the pooled t-test says "gain" or
"loss" 4-7% of the time at 2-10 seeds a side, whatever the split between seed and sentence variance (5-6% where
one system's spread is twice the other's, with as many seeds on each side); Welch's is conservative at few seeds
(2-3% at 2, losing power); the multi-bootstrap's error rate depends on how the seed variance splits between
seeds and sentences, which a user cannot know (22% at 2 seeds when seed offsets dominate, under 1% when
sentence noise does); the old rule's was 25% at 2 seeds, and its power at a fixed gain fell with more seeds
(bench/RESULTS.md, "Verdicts").

Per comparison (:class:`SeedTest`): the mean gain, its 95% interval, the two-sided p, the minimum gain the
seeds at hand detect with 80% power (from the measured spread), and the seeds per side that would bring that
below a target gain (the paper's claimed gain in ordo's verdict suites). The verdict, in four words fixed
before any run (:func:`verdict`):

- :data:`GAIN`: the interval lies above 0; :data:`LOSS`: it lies below 0;
- :data:`RULED_OUT`: the interval contains 0 and its upper end is below the target gain: a gain of the size
  claimed does not hold here;
- :data:`INCONCLUSIVE`: the interval contains 0 and the target gain (or no target is given): more seeds are
  needed (:meth:`SeedTest.seeds_needed` says how many).

A study that fixes its seeds before the runs may add seeds once (:func:`seeds_due`): where its first seeds leave
the claim inconclusive and at most :data:`MORE_SEEDS_UP_TO` seeds a side would detect the target at their
spread, the verdict waits for that many. Looking twice costs little: in the simulation of
``tests/unit/test_seeds.py`` (six seeds a side, a target of 1.0, seed sd 0.7, normal seed scores) it says
"gain" or "loss" at zero effect 5.5% of the time (4.9% at six seeds alone), where 16% of the experiments took
more seeds, and finds a true gain of 1.0 in 68% of experiments against 60% at six.

Beside it, not used by the verdict: the two-sided paired bootstrap p of the difference over the paired seeds
pooled into one test set (sacreBLEU's for BLEU, Koehn 2004; of the sentence scores' mean for RIBES), which
asks whether the difference would hold on other test sentences of the same kind, and ignores seed variance.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scipy import optimize, stats

from ordo.errors import InputError
from ordo.evaluation.bleu import multi_bleu, sacrebleu_bleu
from ordo.evaluation.order import corpus_ribes, ribes_tokens, sentence_ribes
from ordo.evaluation.significance import bleu_bootstrap_p, paired_bootstrap_mean

GAIN, LOSS, RULED_OUT, INCONCLUSIVE = "gain", "loss", "paper's gain ruled out", "inconclusive"
VERDICTS = (GAIN, LOSS, RULED_OUT, INCONCLUSIVE)
ALPHA = 0.05  # the test's level: a 95% interval
POWER = 0.8   # the power at which the minimum detectable gain is stated
MAX_SEEDS = 100  # :meth:`SeedTest.seeds_needed` looks no further
MORE_SEEDS_UP_TO = 10  # :func:`seeds_due`: the most seeds a side an inconclusive claim is given

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


def t_power(gain: float, sd: float, base_seeds: int, system_seeds: int, alpha: float = ALPHA) -> float:
    """The power of the two-sided pooled t-test at level ``alpha`` to find a true ``gain`` between two systems
    whose seed scores spread with standard deviation ``sd``, with ``base_seeds`` and ``system_seeds`` seeds:
    P(|T| > t_{1-α/2}) for T noncentral t with n_a + n_b - 2 degrees of freedom and noncentrality
    gain / (sd √(1/n_a + 1/n_b))."""
    df = base_seeds + system_seeds - 2
    noncentrality = gain / (sd * math.sqrt(1 / base_seeds + 1 / system_seeds))
    critical = stats.t.ppf(1 - alpha / 2, df)
    wrong_side = float(stats.nct.cdf(-critical, df, noncentrality))  # NaN where it underflows far from 0
    return float(stats.nct.sf(critical, df, noncentrality)) + (0.0 if math.isnan(wrong_side) else wrong_side)


def min_detectable_gain(sd: float, base_seeds: int, system_seeds: int, alpha: float = ALPHA,
                        power: float = POWER) -> float:
    """The smallest true gain the pooled t-test finds with probability ``power`` (:func:`t_power`), for seed
    scores of standard deviation ``sd`` and the given seed counts: ``sd`` times that of a spread of 1, as the
    power depends on gain / sd alone (computed once per seed counts, level and power); 0 when ``sd`` is 0."""
    return sd * _unit_min_detectable_gain(base_seeds, system_seeds, alpha, power)


@functools.cache
def _unit_min_detectable_gain(base_seeds: int, system_seeds: int, alpha: float, power: float) -> float:
    """:func:`min_detectable_gain` for seed scores of standard deviation 1."""
    standard_error = math.sqrt(1 / base_seeds + 1 / system_seeds)
    return float(optimize.brentq(lambda gain: t_power(gain, 1.0, base_seeds, system_seeds, alpha) - power,
                                 0.0, 20 * standard_error))


def seeds_needed(target_gain: float, sd: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """The fewest seeds per side (at least 2, the same on both) whose minimum detectable gain
    (:func:`min_detectable_gain`) for seed scores of standard deviation ``sd`` is at most ``target_gain``; None
    beyond :data:`MAX_SEEDS`. How a verdict suite sizes a claim before its runs, from an assumed ``sd``."""
    for seeds in range(2, MAX_SEEDS + 1):
        if min_detectable_gain(sd, seeds, seeds, alpha, power) <= target_gain:
            return seeds
    return None


def seeds_due(base_scores: Sequence[float], system_scores: Sequence[float], target_gain: float, first: int,
              up_to: int = MORE_SEEDS_UP_TO) -> int:
    """The seeds a side a verdict against ``target_gain`` is due at (module docstring): ``first``, or, where the
    test of the first ``first`` scores of each side is :data:`INCONCLUSIVE` and :meth:`SeedTest.seeds_needed`
    is at most ``up_to``, that many; from the first ``first`` scores alone, so later seeds do not move it. Fewer
    than ``first`` scores on a side: ``first``."""
    if min(len(base_scores), len(system_scores)) < first or first < 2:
        return first
    test = SeedTest(tuple(base_scores[:first]), tuple(system_scores[:first]))
    needed = test.seeds_needed(target_gain)
    if test.verdict(target_gain) != INCONCLUSIVE or needed is None or needed > up_to:
        return first
    return max(first, needed)


def verdict(interval: tuple[float, float], target_gain: float | None = None) -> str:
    """The verdict word for a gain's confidence ``interval`` (module docstring): :data:`GAIN` above 0,
    :data:`LOSS` below 0, else :data:`RULED_OUT` where its upper end is below ``target_gain``, else
    :data:`INCONCLUSIVE`."""
    low, high = interval
    if low > 0:
        return GAIN
    if high < 0:
        return LOSS
    if target_gain is not None and high < target_gain:
        return RULED_OUT
    return INCONCLUSIVE


@dataclass(frozen=True)
class SeedTest:
    """Student's two-sample t-test of the system's mean score over its seeds against the baseline's, with the
    pooled variance of both (module docstring). ``alpha``: the level, so the interval is 1 - alpha. One side may
    have a single seed (an upper bound run once), its spread then taken to be the other side's."""

    base_scores: tuple[float, ...]
    system_scores: tuple[float, ...]
    alpha: float = ALPHA

    def __post_init__(self) -> None:
        if min(len(self.base_scores), len(self.system_scores)) < 1 or self.df < 1:
            raise InputError(f"{len(self.base_scores)} baseline and {len(self.system_scores)} system seed(s): the "
                             "test needs a seed of each system and three in all, to measure the spread (two of "
                             "each at least, for a spread that is not one system's alone)")

    @property
    def mean_gain(self) -> float:
        """The system's mean score minus the baseline's."""
        return statistics.fmean(self.system_scores) - statistics.fmean(self.base_scores)

    @property
    def df(self) -> int:
        """The degrees of freedom, n_a + n_b - 2."""
        return len(self.base_scores) + len(self.system_scores) - 2

    @property
    def sd(self) -> float:
        """The pooled seed standard deviation: √(((n_a - 1) s_a² + (n_b - 1) s_b²) / (n_a + n_b - 2))."""
        squares = sum((len(s) - 1) * statistics.variance(s) for s in (self.base_scores, self.system_scores)
                      if len(s) > 1)
        return math.sqrt(squares / self.df)

    @property
    def standard_error(self) -> float:
        """The standard error of :attr:`mean_gain`: sd √(1/n_a + 1/n_b)."""
        return self.sd * math.sqrt(1 / len(self.base_scores) + 1 / len(self.system_scores))

    @property
    def interval(self) -> tuple[float, float]:
        """The 1 - alpha confidence interval of the gain: mean gain ± t_{1-α/2, df} x standard error."""
        half = float(stats.t.ppf(1 - self.alpha / 2, self.df)) * self.standard_error
        return self.mean_gain - half, self.mean_gain + half

    @property
    def p_value(self) -> float:
        """The two-sided p of a gain of 0: 2 P(T_df > |mean gain| / standard error)."""
        if self.standard_error == 0:
            return 1.0 if self.mean_gain == 0 else 0.0
        return float(2 * stats.t.sf(abs(self.mean_gain) / self.standard_error, self.df))

    def min_detectable_gain(self, power: float = POWER) -> float:
        """The gain this many seeds find with probability ``power``, at the measured spread
        (:func:`min_detectable_gain`)."""
        return min_detectable_gain(self.sd, len(self.base_scores), len(self.system_scores), self.alpha, power)

    def seeds_needed(self, target_gain: float, power: float = POWER) -> int | None:
        """The fewest seeds per side (at least 2, the same on both) whose minimum detectable gain at the
        measured spread is at most ``target_gain`` (:func:`seeds_needed`); None beyond :data:`MAX_SEEDS`."""
        return seeds_needed(target_gain, self.sd, self.alpha, power)

    def verdict(self, target_gain: float | None = None) -> str:
        """:func:`verdict` of :attr:`interval` against ``target_gain``."""
        return verdict(self.interval, target_gain)


def pooled_bootstrap_p(base_runs: Sequence[Sequence[str]], system_runs: Sequence[Sequence[str]],
                       refs: Sequence[str], indices: Sequence[int] | None = None,
                       paired_p: PairedTest = bleu_bootstrap_p) -> float:
    """The two-sided paired test ``paired_p`` (sacreBLEU's paired bootstrap of BLEU by default) of the system
    against the baseline, the runs paired in order (``base_runs[i]`` with ``system_runs[i]``, hypotheses of the
    test set; unpaired runs left out) pooled into one test set; only the test pairs ``indices`` where given
    (e.g. one bucket of reordering difficulty)."""
    pairs = min(len(base_runs), len(system_runs))
    picked = range(len(refs)) if indices is None else indices
    base, system = ([runs[s][i] for s in range(pairs) for i in picked] for runs in (base_runs, system_runs))
    return paired_p(base, system, [refs[i] for _ in range(pairs) for i in picked])


@dataclass(frozen=True)
class SeedComparison:
    """A system against its baseline over seeds in one metric (:func:`compare_seeds`): the t-test over seeds,
    the pooled paired bootstrap p over test sentences beside it, and the target gain of the verdict."""

    metric: str
    test: SeedTest
    sentence_p: float          # :func:`pooled_bootstrap_p` over the seeds paired in order
    target_gain: float | None  # the gain a claim states (e.g. the paper's), None where there is none

    @property
    def verdict(self) -> str:
        """:meth:`SeedTest.verdict` against :attr:`target_gain`."""
        return self.test.verdict(self.target_gain)

    @property
    def seeds_needed(self) -> int | None:
        """:meth:`SeedTest.seeds_needed` for :attr:`target_gain` (None without one)."""
        return None if self.target_gain is None else self.test.seeds_needed(self.target_gain)


def compare_seeds(base_runs: Sequence[list[str]], system_runs: Sequence[list[str]], refs: list[str],
                  metric: SeedMetric | None = None, target_gain: float | None = None) -> SeedComparison:
    """Score every run (test hypotheses, one list per seed) in ``metric`` (sacreBLEU's BLEU by default;
    :func:`bleu_metric` ``(tokenized=True)`` for pre-tokenized text, :func:`ribes_metric` for word order) and
    compare the two systems (:class:`SeedTest`) against ``target_gain``.

    Raises:
        InputError: too few runs (:class:`SeedTest`), a run whose line count is not the references', a run
            identical to another of its side (one output given twice would fake the spread), or a target gain
            that is not a positive number (NaN, infinite, 0 or below).
    """
    metric = metric or bleu_metric()
    if target_gain is not None and not (0 < target_gain < math.inf):
        raise InputError(f"target gain {target_gain}: give the (positive, finite) gain a claim states")
    for side, runs in (("baseline", base_runs), ("system", system_runs)):
        for number, hyps in enumerate(runs, 1):
            if len(hyps) != len(refs):
                raise InputError(f"{side} run {number}: {len(hyps)} lines for {len(refs)} references")
            if any(hyps == other for other in runs[:number - 1]):
                raise InputError(f"{side} run {number} is identical to an earlier {side} run: the same output "
                                 "given twice, not two seeds")
    test = SeedTest(tuple(metric.score(hyps, refs) for hyps in base_runs),
                    tuple(metric.score(hyps, refs) for hyps in system_runs))
    return SeedComparison(metric.name, test, pooled_bootstrap_p(base_runs, system_runs, refs,
                                                                paired_p=metric.paired_p), target_gain)
