"""Is system B better than baseline A? sacreBLEU's paired tests, the sign test, and a bootstrap for RIBES.

- Paired bootstrap resampling (Koehn, 2004, "Statistical significance tests for machine translation
  evaluation", EMNLP) and approximate randomization (Riezler & Maxwell, 2005, "On some pitfalls in automatic
  evaluation and significance testing for MT", ACL workshop) over BLEU, chrF and TER are sacreBLEU's own
  (``sacrebleu.significance.PairedTest``, the tests behind ``sacrebleu --paired-bs`` and ``--paired-ar``).
  Both p-values are two-sided: the chance of a difference at least as large as the observed one if the
  two systems were interchangeable.
- The sign test on corpus BLEU: Collins, Koehn & Kučerová (2005), "Clause restructuring for statistical
  machine translation", ACL, §5. sacreBLEU has none.
- The paired bootstrap of a mean of sentence scores (RIBES, which sacreBLEU does not compute) draws the
  same resampled test sets as sacreBLEU's bootstrap and computes its p-value the same way.

Resampling is seeded: sacreBLEU reads ``SACREBLEU_SEED`` (default 12345) and records the seed and the
number of samples in each test's signature.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np
from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.metrics.base import Metric
from sacrebleu.significance import PairedTest, Result

from ordo.errors import InputError
from ordo.evaluation.bleu import bleu_from_stats, check_corpus, sentence_stats

TIE_TOLERANCE = 1e-9
"""BLEU points (0-100) below which a sentence swap counts as leaving corpus BLEU unchanged.

Far below the effect of one n-gram in any real corpus; it only absorbs floating-point noise."""

METRICS = ("bleu", "chrf", "ter")
"""The metrics of :func:`paired_tests`: sacreBLEU's BLEU, chrF and TER with their default settings."""

SACREBLEU_SEED = 12345
"""sacreBLEU's default resampling seed (when ``SACREBLEU_SEED`` is unset)."""


@dataclass(frozen=True)
class SignTestResult:
    """Outcome of the sign test of Collins et al. (2005, §5).

    Attributes:
        better: sentences whose swap from A's to B's translation raises corpus BLEU.
        worse: sentences whose swap lowers it.
        ties: sentences whose swap leaves it unchanged (dropped from the test).
        p_value: two-sided exact binomial p-value of ``better`` vs ``worse`` under p = 1/2.
    """

    better: int
    worse: int
    ties: int
    p_value: float


@dataclass(frozen=True)
class PairedComparison:
    """sacreBLEU's two paired tests of one metric, system B against baseline A.

    Attributes:
        metric: sacreBLEU's name of the metric: ``BLEU``, ``chrF2`` or ``TER`` (for TER lower is better).
        score_a: A's corpus score on the full test set (0-100).
        score_b: B's corpus score.
        mean_a: A's mean score over the bootstrap samples.
        ci_a: half the width of A's 95% bootstrap interval (sacreBLEU's "μ ± 95% CI").
        mean_b: B's mean score over the bootstrap samples.
        ci_b: half the width of B's 95% bootstrap interval.
        bootstrap_p: two-sided p-value of paired bootstrap resampling.
        randomization_p: two-sided p-value of approximate randomization.
        bootstrap_signature: sacreBLEU's signature of the metric with the bootstrap's seed and samples.
        randomization_signature: the same with approximate randomization's seed and trials.
    """

    metric: str
    score_a: float
    score_b: float
    mean_a: float
    ci_a: float
    mean_b: float
    ci_b: float
    bootstrap_p: float
    randomization_p: float
    bootstrap_signature: str
    randomization_signature: str


def _check_pair(hyps_a: Sequence[str], hyps_b: Sequence[str], refs: Sequence[str]) -> None:
    """Reject two systems that cannot be compared on ``refs``.

    Raises:
        InputError: when the three lists differ in length or are empty, or ``refs`` is not one reference string
            per sentence (the paired tests take one reference; a list of reference streams is refused).
    """
    check_corpus(hyps_a, refs)
    if not all(isinstance(ref, str) for ref in refs):
        raise InputError("refs: the paired tests take one reference per sentence, a list of strings (not a list "
                         "of reference streams)")
    if not isinstance(hyps_b, str) and len(hyps_a) != len(hyps_b):
        raise InputError(f"system A has {len(hyps_a)} sentences but system B has {len(hyps_b)}")
    check_corpus(hyps_b, refs)


def sign_test_p_value(better: int, worse: int) -> float:
    """Two-sided exact binomial p-value of ``better`` successes in ``better + worse`` fair coin flips.

    ``p = min(1, 2 * sum_{i <= k} C(n, i) / 2**n)`` with ``n = better + worse`` and
    ``k = min(better, worse)``, summed in log space so that large ``n`` neither overflows nor
    underflows before the end. ``n = 0`` gives 1.
    """
    n, k = better + worse, min(better, worse)
    if n == 0 or 2 * k >= n:
        return 1.0
    log_terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(k + 1)]
    largest = max(log_terms)
    log_tail = largest + math.log(math.fsum(math.exp(term - largest) for term in log_terms))
    return min(1.0, 2.0 * math.exp(log_tail - n * math.log(2.0)))


def sign_test(
    hyps_a: Sequence[str], hyps_b: Sequence[str], refs: Sequence[str], lowercase: bool = False
) -> SignTestResult:
    """Sign test of Collins, Koehn & Kučerová (2005, §5) for corpus BLEU.

    For each sentence i, A's (the baseline's) translation of sentence i is replaced by B's, all
    other sentences staying A's, and corpus BLEU is compared with A's: up is a "better" for B,
    down a "worse", unchanged (within ``TIE_TOLERANCE``) a tie. Ties are dropped and better vs
    worse is tested against a fair coin with the exact two-sided binomial test. With summed
    sufficient statistics each swap is ``total_A - stats_A[i] + stats_B[i]``, so the test is O(N).

    Args:
        hyps_a: baseline outputs (detokenized).
        hyps_b: the other system's outputs, aligned with ``hyps_a``.
        refs: references, aligned with both.
        lowercase: case-insensitive BLEU.

    Raises:
        InputError: when the three lists differ in length or are empty.
    """
    _check_pair(hyps_a, hyps_b, refs)
    stats_a, stats_b = sentence_stats(hyps_a, refs, lowercase), sentence_stats(hyps_b, refs, lowercase)
    total_a = stats_a.sum(axis=0)  # (10,)
    swapped = total_a[None, :] - stats_a + stats_b  # (N, 10)
    baseline = bleu_from_stats(total_a)
    delta = np.array([bleu_from_stats(row) for row in swapped]) - baseline  # (N,)
    better = int((delta > TIE_TOLERANCE).sum())
    worse = int((delta < -TIE_TOLERANCE).sum())
    ties = len(delta) - better - worse
    return SignTestResult(better, worse, ties, sign_test_p_value(better, worse))


def _metric(name: str, lowercase: bool) -> Metric:
    """A fresh sacreBLEU metric by ordo's name (one of :data:`METRICS`); TER keeps sacreBLEU's default
    case-insensitive matching, which its signature records."""
    if name == "bleu":
        # force=True only silences the "tokenized period" warning; corpus_scores already gives it.
        return BLEU(lowercase=lowercase, force=True)
    if name == "chrf":
        return CHRF(lowercase=lowercase)
    if name == "ter":
        return TER()
    raise InputError(f"unknown metric {name!r} (choose from {', '.join(METRICS)})")


def _sacrebleu_test(
    hyps_a: Sequence[str], hyps_b: Sequence[str], refs: Sequence[str], test_type: str, samples: int,
    metrics: Sequence[str], lowercase: bool,
) -> tuple[dict[str, str], dict[str, tuple[Result, Result]]]:
    """Run ``sacrebleu.significance.PairedTest`` (``test_type`` ``"bs"`` or ``"ar"``) of B against A.

    Returns:
        The formatted signature and the (A, B) results of each metric, keyed by sacreBLEU's metric name.

    Raises:
        InputError: when ``samples < 1`` (sacreBLEU would take 0 for its default).
    """
    if samples < 1:
        raise InputError(f"the number of samples must be at least 1, got {samples}")
    test = PairedTest([("A", list(hyps_a)), ("B", list(hyps_b))], {name: _metric(name, lowercase) for name in metrics},
                      [list(refs)], test_type=test_type, n_samples=samples)
    signatures, columns = test()
    results = {name: cast("tuple[Result, Result]", tuple(columns[name])) for name in signatures}
    return {name: signature.format() for name, signature in signatures.items()}, results


def _p_value(result: Result, baseline_score: float) -> float:
    """System B's p-value from sacreBLEU, or 1 when B's corpus score equals the baseline's.

    sacreBLEU counts only resampled differences strictly larger than the observed one, so two outputs of the
    same score can get the smallest p-value there is, ``1 / (samples + 1)``: a system compared with itself, or
    two that score the same in every resample (as two without a 4-gram match do in BLEU). A difference of 0 is
    no evidence of a difference.
    """
    return 1.0 if result.score == baseline_score else float(cast(float, result.p_value))


def paired_tests(
    hyps_a: Sequence[str],
    hyps_b: Sequence[str],
    refs: Sequence[str],
    bootstrap_samples: int = 1000,
    randomization_trials: int = 10000,
    lowercase: bool = False,
    metrics: Sequence[str] = METRICS,
) -> list[PairedComparison]:
    """sacreBLEU's paired bootstrap resampling and approximate randomization of B against baseline A.

    Both tests are two-sided, as ``sacrebleu --paired-bs`` and ``--paired-ar`` report them. Two
    systems with the same corpus score (identical ones, say) get p = 1 from both.

    Args:
        hyps_a: baseline outputs (detokenized).
        hyps_b: the other system's outputs, aligned with ``hyps_a``.
        refs: references, aligned with both.
        bootstrap_samples: resampled test sets of the bootstrap (sacreBLEU's default 1000).
        randomization_trials: shuffles of approximate randomization (sacreBLEU's default 10000).
        lowercase: case-insensitive BLEU and chrF (TER is case-insensitive as sacreBLEU's default).
        metrics: a subset of :data:`METRICS`, in the order of the result.

    Returns:
        One :class:`PairedComparison` per metric.

    Raises:
        InputError: when the lists differ in length or are empty, a metric is unknown, or a number of
            samples is below 1.
    """
    _check_pair(hyps_a, hyps_b, refs)
    bs_signatures, bootstrap = _sacrebleu_test(hyps_a, hyps_b, refs, "bs", bootstrap_samples, metrics, lowercase)
    ar_signatures, randomization = _sacrebleu_test(hyps_a, hyps_b, refs, "ar", randomization_trials, metrics,
                                                   lowercase)
    comparisons = []
    for name, (result_a, result_b) in bootstrap.items():
        comparisons.append(PairedComparison(
            metric=name, score_a=float(result_a.score), score_b=float(result_b.score),
            mean_a=float(cast(float, result_a.mean)), ci_a=float(cast(float, result_a.ci)),
            mean_b=float(cast(float, result_b.mean)), ci_b=float(cast(float, result_b.ci)),
            bootstrap_p=_p_value(result_b, result_a.score),
            randomization_p=_p_value(randomization[name][1], result_a.score),
            bootstrap_signature=bs_signatures[name], randomization_signature=ar_signatures[name],
        ))
    return comparisons


def bleu_bootstrap_p(
    hyps_a: Sequence[str], hyps_b: Sequence[str], refs: Sequence[str], num_samples: int = 1000,
    lowercase: bool = False,
) -> float:
    """Two-sided p-value of sacreBLEU's paired bootstrap resampling of the BLEU difference of A and B
    (1 for two of the same BLEU), without the other tests of :func:`paired_tests`.

    Raises:
        InputError: when the lists differ in length or are empty, or ``num_samples < 1``.
    """
    _check_pair(hyps_a, hyps_b, refs)
    _, results = _sacrebleu_test(hyps_a, hyps_b, refs, "bs", num_samples, ["bleu"], lowercase)
    return _p_value(results["BLEU"][1], results["BLEU"][0].score)


def paired_bootstrap_mean(scores_a: Sequence[float], scores_b: Sequence[float], num_samples: int = 1000,
                          seed: int = SACREBLEU_SEED) -> float:
    """Two-sided paired bootstrap p-value of the difference of two means of sentence scores (RIBES).

    sacreBLEU's paired bootstrap applied to a metric that is a mean of sentence scores: it draws the
    same resampled test sets (``numpy.random.default_rng(seed).choice``; with sacreBLEU's seed, the
    very samples of its BLEU bootstrap) and returns ``(1 + #{samples: |d| - mean(|d|) > |d_obs|}) /
    (num_samples + 1)`` for the samples' absolute differences ``|d|`` of the means and the observed one
    ``|d_obs|``. Identical score lists give 1.

    Raises:
        InputError: when the lists differ in length or are empty, or ``num_samples < 1``.
    """
    if len(scores_a) != len(scores_b) or not scores_a:
        raise InputError(f"paired scores: {len(scores_a)} and {len(scores_b)} sentences")
    if num_samples < 1:
        raise InputError(f"the number of samples must be at least 1, got {num_samples}")
    a, b = np.asarray(scores_a, dtype=np.float64), np.asarray(scores_b, dtype=np.float64)  # (N,)
    if np.array_equal(a, b):
        return 1.0
    draws = np.random.default_rng(seed).choice(len(a), size=(num_samples, len(a)), replace=True)  # (S, N)
    differences = np.abs(b[draws].mean(axis=1) - a[draws].mean(axis=1))  # (S,)
    observed = abs(b.mean() - a.mean())
    return (int((differences - differences.mean() > observed).sum()) + 1) / (num_samples + 1)


def compare_systems(
    hyps_a: list[str],
    hyps_b: list[str],
    refs: list[str],
    bootstrap_samples: int = 1000,
    randomization_trials: int = 10000,
    lowercase: bool = False,
) -> dict[str, Any]:
    """:func:`paired_tests` and :func:`sign_test` of system B (``hyps_b``) against baseline A (``hyps_a``), the
    lines of one test set (:func:`ordo.evaluation.bleu.read_systems` reads and checks them).

    Returns:
        ``{"paired_tests": {metric: {...}}, "sign_test": {...}}``, the fields of
        :class:`PairedComparison` (keyed by sacreBLEU's metric name) and :class:`SignTestResult` as
        plain dicts (JSON-serialisable).
    """
    comparisons = paired_tests(hyps_a, hyps_b, refs, bootstrap_samples, randomization_trials, lowercase)
    return {
        "paired_tests": {comparison.metric: asdict(comparison) for comparison in comparisons},
        "sign_test": asdict(sign_test(hyps_a, hyps_b, refs, lowercase)),
    }
