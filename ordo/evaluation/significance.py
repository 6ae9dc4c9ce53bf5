"""Is system B's BLEU better than baseline A's? The sign test and paired bootstrap resampling.

Both tests work on per-sentence BLEU sufficient statistics (``ordo.evaluation.bleu.sentence_stats``),
so a re-scored corpus costs one vector sum instead of re-tokenizing and re-counting n-grams.
BLEU here is sacreBLEU's default corpus BLEU (Papineni et al., 2002; Post, 2018).

- Sign test: Collins, Koehn & Kučerová (2005), "Clause restructuring for statistical machine
  translation", ACL, §5.
- Paired bootstrap resampling: Koehn (2004), "Statistical significance tests for machine
  translation evaluation", EMNLP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ordo.errors import InputError
from ordo.evaluation.bleu import bleu_from_stats, check_corpus, read_hyp_ref, sentence_stats

TIE_TOLERANCE = 1e-9
"""BLEU points (0-100) below which a sentence swap counts as leaving corpus BLEU unchanged.

Far below the effect of one n-gram in any real corpus; it only absorbs floating-point noise."""


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
class BootstrapResult:
    """Outcome of paired bootstrap resampling (Koehn, 2004).

    Attributes:
        bleu_a: corpus BLEU of the baseline A on the full test set.
        bleu_b: corpus BLEU of system B on the full test set.
        mean_a: mean BLEU of A over the bootstrap samples.
        ci_a: A's 95% interval ``(low, high)``: the samples' BLEU with the top and bottom 2.5% dropped.
        mean_b: mean BLEU of B over the bootstrap samples.
        ci_b: B's 95% interval, as ``ci_a``.
        p_value: one-sided, for "B is better than A":
            ``(1 + #{samples: BLEU_B - BLEU_A <= 0}) / (num_samples + 1)``.
        num_samples: number of bootstrap samples drawn.
        seed: seed of the NumPy generator that drew them.
    """

    bleu_a: float
    bleu_b: float
    mean_a: float
    ci_a: tuple[float, float]
    mean_b: float
    ci_b: tuple[float, float]
    p_value: float
    num_samples: int
    seed: int


def _paired_stats(
    hyps_a: Sequence[str], hyps_b: Sequence[str], refs: Sequence[str], lowercase: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Sentence statistics of both systems against the same references, each ``(N, 10)``."""
    if len(hyps_a) != len(hyps_b):
        raise InputError(f"system A has {len(hyps_a)} sentences but system B has {len(hyps_b)}")
    check_corpus(hyps_a, refs)
    return sentence_stats(hyps_a, refs, lowercase), sentence_stats(hyps_b, refs, lowercase)


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
    stats_a, stats_b = _paired_stats(hyps_a, hyps_b, refs, lowercase)
    total_a = stats_a.sum(axis=0)  # (10,)
    swapped = total_a[None, :] - stats_a + stats_b  # (N, 10)
    delta = bleu_from_stats(swapped) - bleu_from_stats(total_a)  # (N,)
    better = int((delta > TIE_TOLERANCE).sum())
    worse = int((delta < -TIE_TOLERANCE).sum())
    ties = len(delta) - better - worse
    return SignTestResult(better, worse, ties, sign_test_p_value(better, worse))


def _resample_counts(num_sentences: int, num_samples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each sentence is drawn in each bootstrap sample (draws with replacement).

    Shape:
        Returns ``(num_samples, num_sentences)`` float64, each row summing to ``num_sentences``.
    """
    draws = rng.integers(0, num_sentences, size=(num_samples, num_sentences))  # (S, N)
    flat = draws + num_sentences * np.arange(num_samples)[:, None]  # (S, N) indices into S*N
    counts = np.bincount(flat.ravel(), minlength=num_samples * num_sentences)
    return counts.reshape(num_samples, num_sentences).astype(np.float64)  # (S, N)


def _interval_95(scores: np.ndarray) -> tuple[float, float]:
    """Drop the top and bottom 2.5% of ``scores`` and return the extremes left (Koehn, 2004)."""
    ordered = np.sort(scores)
    dropped = len(ordered) // 40
    return float(ordered[dropped]), float(ordered[len(ordered) - dropped - 1])


def paired_bootstrap(
    hyps_a: Sequence[str],
    hyps_b: Sequence[str],
    refs: Sequence[str],
    num_samples: int = 1000,
    seed: int = 12345,
    lowercase: bool = False,
) -> BootstrapResult:
    """Paired bootstrap resampling of Koehn (2004) on corpus BLEU.

    Draws ``num_samples`` test sets of N sentences with replacement, the same draws for both
    systems, and scores both on each. The p-value is the standard one-sided one for "B is better
    than A", with the +1 correction that keeps it valid for few samples:
    ``(#{samples: BLEU_B - BLEU_A <= 0} + 1) / (num_samples + 1)``. Identical systems give 1;
    to test "A is better than B", swap the arguments. (sacreBLEU's ``--paired-bs`` instead
    reports a two-sided p-value of the centred absolute difference.)

    Args:
        hyps_a: baseline outputs (detokenized).
        hyps_b: the other system's outputs, aligned with ``hyps_a``.
        refs: references, aligned with both.
        num_samples: bootstrap samples to draw.
        seed: seed of ``numpy.random.default_rng``; equal seeds give equal results.
        lowercase: case-insensitive BLEU.

    Raises:
        InputError: when the lists differ in length or are empty, or ``num_samples < 1``.
    """
    if num_samples < 1:
        raise InputError(f"num_samples must be at least 1, got {num_samples}")
    stats_a, stats_b = _paired_stats(hyps_a, hyps_b, refs, lowercase)
    counts = _resample_counts(len(stats_a), num_samples, np.random.default_rng(seed))  # (S, N)
    sample_stats = counts @ np.concatenate([stats_a, stats_b], axis=1)  # (S, 20)
    scores_a = bleu_from_stats(sample_stats[:, : stats_a.shape[1]])  # (S,)
    scores_b = bleu_from_stats(sample_stats[:, stats_a.shape[1] :])  # (S,)
    not_better = int((scores_b - scores_a <= 0).sum())
    return BootstrapResult(
        bleu_a=float(bleu_from_stats(stats_a.sum(axis=0))),
        bleu_b=float(bleu_from_stats(stats_b.sum(axis=0))),
        mean_a=float(scores_a.mean()),
        ci_a=_interval_95(scores_a),
        mean_b=float(scores_b.mean()),
        ci_b=_interval_95(scores_b),
        p_value=(not_better + 1) / (num_samples + 1),
        num_samples=num_samples,
        seed=seed,
    )


def paired_bootstrap_mean(scores_a: Sequence[float], scores_b: Sequence[float], num_samples: int = 1000,
                          seed: int = 12345) -> float:
    """Paired bootstrap (Koehn 2004) of a metric that is the mean of sentence scores (RIBES): the one-sided
    p-value for "B's mean is higher", ``(#{samples: mean_B - mean_A <= 0} + 1) / (num_samples + 1)``."""
    if len(scores_a) != len(scores_b) or not scores_a:
        raise InputError(f"paired scores: {len(scores_a)} and {len(scores_b)} sentences")
    counts = _resample_counts(len(scores_a), num_samples, np.random.default_rng(seed))  # (S, N)
    differences = counts @ (np.asarray(scores_b) - np.asarray(scores_a)) / len(scores_a)  # (S,)
    return (int((differences <= 0).sum()) + 1) / (num_samples + 1)


def two_sided_bootstrap_p(hyps_a: Sequence[str], hyps_b: Sequence[str], refs: Sequence[str],
                          num_samples: int = 1000, seed: int = 12345) -> float:
    """Two-sided paired bootstrap p-value of a BLEU difference between A and B: twice the smaller of the
    one-sided p-values of :func:`paired_bootstrap` ("B better" and "A better"), at most 1."""
    b_better = paired_bootstrap(hyps_a, hyps_b, refs, num_samples, seed).p_value
    a_better = paired_bootstrap(hyps_b, hyps_a, refs, num_samples, seed).p_value
    return min(1.0, 2 * min(a_better, b_better))


def compare_files(
    hyp_a: str | Path,
    hyp_b: str | Path,
    ref: str | Path,
    num_samples: int = 1000,
    seed: int = 12345,
    lowercase: bool = False,
) -> dict[str, Any]:
    """Sign test and paired bootstrap of system B (``hyp_b``) against baseline A (``hyp_a``).

    Returns:
        ``{"sign_test": {...}, "paired_bootstrap": {...}}``, the fields of :class:`SignTestResult`
        and :class:`BootstrapResult` as plain dicts (JSON-serialisable).

    Raises:
        InputError: naming the files when a system's line count differs from the reference's,
            or they are empty.
    """
    hyps_a, refs = read_hyp_ref(hyp_a, ref)
    hyps_b, _ = read_hyp_ref(hyp_b, ref)
    return {
        "sign_test": asdict(sign_test(hyps_a, hyps_b, refs, lowercase)),
        "paired_bootstrap": asdict(paired_bootstrap(hyps_a, hyps_b, refs, num_samples, seed, lowercase)),
    }
