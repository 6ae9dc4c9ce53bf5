"""Corpus BLEU and chrF, multi-bleu.perl's tokenized BLEU, and per-sentence BLEU statistics.

BLEU is the geometric mean of clipped n-gram precisions (n = 1..4) times a brevity penalty
(Papineni et al., 2002, "BLEU: a method for automatic evaluation of machine translation", ACL).
The reported scores come from sacreBLEU (Post, 2018, "A Call for Clarity in Reporting BLEU Scores",
WMT) on detokenized text, with its signature; chrF is Popović (2015, WMT). ``multi_bleu`` reproduces
Moses' ``multi-bleu.perl`` on whitespace tokens, for comparison with older papers.

Sufficient statistics (``sentence_stats``) are rows in sacreBLEU's own order::

    [hyp_len, ref_len, matches_1..matches_4, totals_1..totals_4]

Summing rows and applying ``bleu_from_stats`` gives sacreBLEU's corpus BLEU; the sign test in
``ordo.evaluation.significance`` re-scores the corpus this way once per swapped sentence.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sacrebleu.metrics import BLEU, CHRF

from ordo.data.textio import read_parallel_lines
from ordo.errors import InputError

MAX_ORDER = 4
"""Highest n-gram order of BLEU (Papineni et al., 2002)."""

NUM_STATS = 2 + 2 * MAX_ORDER
"""Columns of a sufficient-statistics row: hyp_len, ref_len, 4 match counts, 4 totals."""


def check_corpus(hyps: Sequence[str], refs: Sequence[str]) -> None:
    """Reject a hypothesis/reference pair of lists that cannot be scored.

    Raises:
        InputError: when the lists differ in length or are empty.
    """
    if len(hyps) != len(refs):
        raise InputError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        raise InputError("no sentences to score")


def corpus_scores(
    hyps: Sequence[str], refs: Sequence[str], tokenized_bleu: bool = False, lowercase: bool = False
) -> dict[str, float | str]:
    """sacreBLEU BLEU and chrF of detokenized text, and optionally multi-bleu.perl's BLEU.

    Args:
        hyps: system outputs, one detokenized sentence each.
        refs: references, aligned with ``hyps``.
        tokenized_bleu: also compute ``tok_bleu`` with :func:`multi_bleu` on whitespace tokens.
        lowercase: case-insensitive scores (recorded in the signatures as ``case:lc``).

    sacreBLEU's warning about tokenized input is silenced when ``tokenized_bleu`` says the text is tokenized.

    Returns:
        ``{"bleu", "chrf", "bleu_signature", "chrf_signature"}`` and, when asked, ``"tok_bleu"``;
        scores are on the 0-100 scale.

    Raises:
        InputError: when the lists differ in length or are empty.
    """
    check_corpus(hyps, refs)
    bleu, chrf = BLEU(lowercase=lowercase, force=tokenized_bleu), CHRF(lowercase=lowercase)
    scores: dict[str, float | str] = {
        "bleu": bleu.corpus_score(list(hyps), [list(refs)]).score,
        "chrf": chrf.corpus_score(list(hyps), [list(refs)]).score,
        "bleu_signature": bleu.get_signature().format(),
        "chrf_signature": chrf.get_signature().format(),
    }
    if tokenized_bleu:
        scores["tok_bleu"] = multi_bleu(hyps, refs, lowercase=lowercase)
    return scores


def sacrebleu_bleu(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """sacreBLEU's corpus BLEU with its default settings (detokenized text)."""
    return float(corpus_scores(hyps, refs)["bleu"])


def _ngram_counts(tokens: Sequence[str], order: int) -> Counter[tuple[str, ...]]:
    """How often each n-gram of length ``order`` occurs in ``tokens``."""
    return Counter(tuple(tokens[i : i + order]) for i in range(len(tokens) - order + 1))


def _multi_bleu_counts(hyps: Sequence[str], refs: Sequence[str], lowercase: bool) -> tuple[
    list[int], list[int], int, int
]:
    """Corpus-summed clipped matches and totals for n = 1..4, hypothesis and reference lengths.

    Tokens are ``str.split()`` of each line, as Perl's ``split`` in multi-bleu.perl.
    """
    matches, totals = [0] * MAX_ORDER, [0] * MAX_ORDER
    hyp_len = ref_len = 0
    for hyp, ref in zip(hyps, refs):
        if lowercase:
            hyp, ref = hyp.lower(), ref.lower()
        hyp_tokens, ref_tokens = hyp.split(), ref.split()
        hyp_len += len(hyp_tokens)
        ref_len += len(ref_tokens)
        for order in range(1, MAX_ORDER + 1):
            hyp_ngrams, ref_ngrams = _ngram_counts(hyp_tokens, order), _ngram_counts(ref_tokens, order)
            totals[order - 1] += sum(hyp_ngrams.values())
            matches[order - 1] += sum(min(count, ref_ngrams[ngram]) for ngram, count in hyp_ngrams.items())
    return matches, totals, hyp_len, ref_len


def multi_bleu(hyps: Sequence[str], refs: Sequence[str], lowercase: bool = False) -> float:
    """BLEU exactly as Moses' ``multi-bleu.perl`` computes it (single reference), on the 0-100 scale.

    Whitespace tokens, case-sensitive unless ``lowercase`` (the script's ``-lc``), n-gram counts
    clipped by the reference counts and summed over the corpus, geometric mean of the four
    precisions, and the corpus-level brevity penalty ``BP = exp(1 - r/c)`` if ``c < r``
    (Papineni et al., 2002, §2.1-2.2). As in the script, the score is 0 when any n-gram precision
    is zero (no smoothing), and 0 when the reference is empty. Where the script dies on an empty
    hypothesis (division by zero), this returns 0.

    Args:
        hyps: tokenized system outputs.
        refs: tokenized references, aligned with ``hyps``.
        lowercase: lowercase both sides first.

    Raises:
        InputError: when the lists differ in length or are empty.
    """
    check_corpus(hyps, refs)
    matches, totals, hyp_len, ref_len = _multi_bleu_counts(hyps, refs, lowercase)
    if ref_len == 0 or hyp_len == 0 or 0 in matches:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / MAX_ORDER
    brevity_penalty = math.exp(1.0 - ref_len / hyp_len) if hyp_len < ref_len else 1.0
    return 100.0 * brevity_penalty * math.exp(log_precision)


def sentence_stats(hyps: Sequence[str], refs: Sequence[str], lowercase: bool = False) -> np.ndarray:
    """Per-sentence BLEU sufficient statistics with sacreBLEU's default tokenization (13a).

    Each sentence is scored by sacreBLEU's public API as a one-line corpus and its ``BLEUScore`` fields
    (``sys_len``, ``ref_len``, ``counts``, ``totals``) make the row, so summed rows reproduce its corpus BLEU.

    Args:
        hyps: detokenized system outputs.
        refs: detokenized references, aligned with ``hyps``.
        lowercase: case-insensitive statistics.

    Shape:
        Returns ``(N, 10)`` int64: ``[hyp_len, ref_len, matches_1..4, totals_1..4]`` per sentence.

    Raises:
        InputError: when the lists differ in length or are empty.
    """
    check_corpus(hyps, refs)
    # force=True only silences the "tokenized period" warning; corpus_scores already gives it.
    metric = BLEU(lowercase=lowercase, force=True)
    rows = []
    for hyp, ref in zip(hyps, refs):
        score = metric.corpus_score([hyp], [[ref]])
        rows.append([score.sys_len, score.ref_len, *score.counts, *score.totals])
    return np.asarray(rows, dtype=np.int64).reshape(len(hyps), NUM_STATS)


def bleu_from_stats(stats: Sequence[int] | np.ndarray) -> float:
    """sacreBLEU's default corpus BLEU (``smooth:exp``, 0-100) from one row of summed sufficient statistics.

    Computed by sacreBLEU's ``BLEU.compute_bleu``, so smoothing and the edge cases (no match, an order
    without n-grams) are sacreBLEU's own.

    Shape:
        stats: ``(10,)`` as :func:`sentence_stats` rows: ``[hyp_len, ref_len, matches_1..4, totals_1..4]``.
    """
    row = [int(value) for value in stats]
    matches, totals = row[2 : 2 + MAX_ORDER], row[2 + MAX_ORDER :]
    return float(BLEU.compute_bleu(matches, totals, row[0], row[1], smooth_method="exp").score)


def read_hyp_ref(hyp_path: str | Path, ref_path: str | Path) -> tuple[list[str], list[str]]:
    """Lines of a hypothesis file and its reference file.

    Raises:
        InputError: naming both files when their line counts differ or they are empty.
    """
    hyps, refs = read_parallel_lines(hyp_path, ref_path)
    if not hyps:
        raise InputError(f"{hyp_path} and {ref_path} are empty: nothing to score")
    return hyps, refs


def score_files(
    hyp_path: str | Path, ref_path: str | Path, tokenized_bleu: bool = False, lowercase: bool = False
) -> dict[str, float | str]:
    """:func:`corpus_scores` of a hypothesis file against a reference file (plain or ``.gz``).

    Raises:
        InputError: naming both files when their line counts differ or they are empty.
    """
    hyps, refs = read_hyp_ref(hyp_path, ref_path)
    return corpus_scores(hyps, refs, tokenized_bleu=tokenized_bleu, lowercase=lowercase)
