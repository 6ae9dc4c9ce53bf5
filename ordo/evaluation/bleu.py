"""Corpus BLEU and chrF, multi-bleu.perl's tokenized BLEU, and per-sentence BLEU statistics.

BLEU is the geometric mean of clipped n-gram precisions (n = 1..4) times a brevity penalty
(Papineni et al., 2002, "BLEU: a method for automatic evaluation of machine translation", ACL).
The reported scores come from sacreBLEU (Post, 2018, "A Call for Clarity in Reporting BLEU Scores",
WMT) on detokenized text, with its signature; chrF is Popović (2015, WMT). ``multi_bleu`` reproduces
Moses' ``multi-bleu.perl`` on whitespace tokens, for comparison with older papers.

Corpus scores take one reference per sentence or several (the NIST test sets have four): ``refs`` is then a
list of reference streams, each aligned with the hypotheses, as sacreBLEU takes them. With several, an n-gram's
count is clipped by its largest count in any reference and the brevity penalty uses, per sentence, the
reference length closest to the hypothesis's (the shorter on a tie), as in sacreBLEU and multi-bleu.perl.

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

from ordo.data.textio import read_lines
from ordo.errors import InputError

MAX_ORDER = 4
"""Highest n-gram order of BLEU (Papineni et al., 2002)."""

NUM_STATS = 2 + 2 * MAX_ORDER
"""Columns of a sufficient-statistics row: hyp_len, ref_len, 4 match counts, 4 totals."""

References = Sequence[str] | Sequence[Sequence[str]]
"""One reference per sentence (a list of strings), or several reference streams (a list of such lists)."""


def reference_streams(refs: References) -> list[list[str]]:
    """``refs`` as sacreBLEU's list of reference streams: one stream when ``refs`` is a list of strings."""
    if all(isinstance(ref, str) for ref in refs):
        return [[str(ref) for ref in refs]]
    return [list(stream) for stream in refs]


def check_corpus(hyps: Sequence[str], refs: References) -> None:
    """Reject hypotheses and references (one per sentence, or several streams) that cannot be scored.

    Raises:
        InputError: when the hypotheses or the references are a single string rather than a list of sentences
            (each character would be scored as a sentence), a reference stream's length differs from the
            hypotheses', or there are none.
    """
    for name, given in (("hypotheses", hyps), ("references", refs)):
        if isinstance(given, str):
            raise InputError(f"{name}: expected a list of sentences, got one string (wrap it in a list: [text])")
    streams = reference_streams(refs)
    for number, stream in enumerate(streams, 1):
        if len(hyps) != len(stream):
            where = f" in reference {number} of {len(streams)}" if len(streams) > 1 else ""
            raise InputError(f"{len(hyps)} hypotheses but {len(stream)} references{where}")
    if not hyps:
        raise InputError("no sentences to score")


def corpus_scores(
    hyps: Sequence[str], refs: References, tokenized_bleu: bool = False, lowercase: bool = False
) -> dict[str, float | str]:
    """sacreBLEU BLEU and chrF of detokenized text, and optionally multi-bleu.perl's BLEU.

    Args:
        hyps: system outputs, one detokenized sentence each.
        refs: references aligned with ``hyps``, or several reference streams, each aligned with ``hyps``
            (sacreBLEU's ``nrefs`` in the signatures).
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
    streams = reference_streams(refs)
    bleu, chrf = BLEU(lowercase=lowercase, force=tokenized_bleu), CHRF(lowercase=lowercase)
    scores: dict[str, float | str] = {
        "bleu": bleu.corpus_score(list(hyps), streams).score,
        "chrf": chrf.corpus_score(list(hyps), streams).score,
        "bleu_signature": bleu.get_signature().format(),
        "chrf_signature": chrf.get_signature().format(),
    }
    if tokenized_bleu:
        scores["tok_bleu"] = multi_bleu(hyps, streams, lowercase=lowercase)
    return scores


def sacrebleu_bleu(hyps: Sequence[str], refs: References, warn_tokenized: bool = True) -> float:
    """sacreBLEU's corpus BLEU with its default settings (detokenized text); ``warn_tokenized=False`` silences its
    warning about tokenized input, for a score on whatever text a corpus holds (training's dev BLEU, which would
    repeat the warning at every validation of a tokenized corpus).

    Raises:
        InputError: when the lists differ in length or are empty.
    """
    check_corpus(hyps, refs)
    return float(BLEU(force=not warn_tokenized).corpus_score(list(hyps), reference_streams(refs)).score)


def _ngram_counts(tokens: Sequence[str], order: int) -> Counter[tuple[str, ...]]:
    """How often each n-gram of length ``order`` occurs in ``tokens``."""
    return Counter(tuple(tokens[i : i + order]) for i in range(len(tokens) - order + 1))


def _closest_length(hyp_len: int, ref_lens: Sequence[int]) -> int:
    """The reference length closest to ``hyp_len``, the shorter on a tie (multi-bleu.perl, sacreBLEU)."""
    return min(ref_lens, key=lambda length: (abs(length - hyp_len), length))


def _multi_bleu_counts(hyps: Sequence[str], streams: Sequence[Sequence[str]], lowercase: bool) -> tuple[
    list[int], list[int], int, int
]:
    """Corpus-summed clipped matches and totals for n = 1..4, hypothesis and effective reference lengths.

    Tokens are ``str.split()`` of each line, as Perl's ``split`` in multi-bleu.perl. With several references
    an n-gram is clipped by its largest count in any of them, and the reference length is the closest one.
    """
    matches, totals = [0] * MAX_ORDER, [0] * MAX_ORDER
    hyp_len = ref_len = 0
    for hyp, *refs in zip(hyps, *streams):
        if lowercase:
            hyp, refs = hyp.lower(), [ref.lower() for ref in refs]
        hyp_tokens, ref_tokens = hyp.split(), [ref.split() for ref in refs]
        hyp_len += len(hyp_tokens)
        ref_len += _closest_length(len(hyp_tokens), [len(tokens) for tokens in ref_tokens])
        for order in range(1, MAX_ORDER + 1):
            hyp_ngrams = _ngram_counts(hyp_tokens, order)
            ref_ngrams: Counter[tuple[str, ...]] = Counter()
            for tokens in ref_tokens:
                ref_ngrams |= _ngram_counts(tokens, order)  # the largest count in any reference
            totals[order - 1] += sum(hyp_ngrams.values())
            matches[order - 1] += sum(min(count, ref_ngrams[ngram]) for ngram, count in hyp_ngrams.items())
    return matches, totals, hyp_len, ref_len


def multi_bleu(hyps: Sequence[str], refs: References, lowercase: bool = False) -> float:
    """BLEU exactly as Moses' ``multi-bleu.perl`` computes it, on the 0-100 scale.

    Whitespace tokens, case-sensitive unless ``lowercase`` (the script's ``-lc``), n-gram counts
    clipped by the reference counts and summed over the corpus, geometric mean of the four
    precisions, and the corpus-level brevity penalty ``BP = exp(1 - r/c)`` if ``c < r``
    (Papineni et al., 2002, §2.1-2.2). With several references (the script's ``ref0 ref1 ...``) each
    n-gram is clipped by its largest count in any reference and ``r`` sums, per sentence, the reference
    length closest to the hypothesis's, the shorter on a tie. As in the script, the score is 0 when any
    n-gram precision is zero (no smoothing), and 0 when the reference is empty. Where the script dies on an
    empty hypothesis (division by zero), this returns 0.

    Args:
        hyps: tokenized system outputs.
        refs: tokenized references aligned with ``hyps``, or several reference streams.
        lowercase: lowercase both sides first.

    Raises:
        InputError: when a reference stream's length differs from the hypotheses', or there are none.
    """
    check_corpus(hyps, refs)
    matches, totals, hyp_len, ref_len = _multi_bleu_counts(hyps, reference_streams(refs), lowercase)
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


def read_systems(hyp_paths: Sequence[str | Path], ref_paths: Sequence[str | Path]
                 ) -> tuple[list[list[str]], list[list[str]]]:
    """Lines of each hypothesis file and of each reference file (one stream per file, in order), every file read
    once: a pipe, such as the shell's ``--ref <(zcat test.de.gz)``, can be read only once.

    Raises:
        InputError: naming the files when there is no reference file, a file is missing, a hypothesis file's
            line count differs from a reference file's, or they are empty.
    """
    if not ref_paths:
        raise InputError(f"{', '.join(map(str, hyp_paths))}: no reference file to score against")
    by_path = {path: read_lines(path) for path in dict.fromkeys(hyp_paths)}  # a path given twice, read once
    streams = [read_lines(path) for path in ref_paths]
    for hyp_path, hyps in by_path.items():
        for ref_path, refs in zip(ref_paths, streams):
            if len(hyps) != len(refs):
                raise InputError(f"{hyp_path} has {len(hyps)} lines but {ref_path} has {len(refs)}")
            if not hyps:
                raise InputError(f"{hyp_path} and {ref_path} are empty: nothing to score")
    return [by_path[path] for path in hyp_paths], streams


def read_hyp_ref(hyp_path: str | Path, ref_path: str | Path) -> tuple[list[str], list[str]]:
    """Lines of a hypothesis file and its reference file (:func:`read_systems`).

    Raises:
        InputError: naming both files when their line counts differ or they are empty.
    """
    (hyps,), (refs,) = read_systems([hyp_path], [ref_path])
    return hyps, refs


def score_files(
    hyp_path: str | Path, ref_path: str | Path | Sequence[str | Path], tokenized_bleu: bool = False,
    lowercase: bool = False,
) -> dict[str, float | str]:
    """:func:`corpus_scores` of a hypothesis file against a reference file, or against several reference files
    (e.g. the four of a NIST test set), each plain or ``.gz``.

    Raises:
        InputError: naming the files when a line count differs from the hypothesis file's, a file is missing,
            or they are empty.
    """
    ref_paths = [ref_path] if isinstance(ref_path, str | Path) else list(ref_path)
    (hyps,), streams = read_systems([hyp_path], ref_paths)
    return corpus_scores(hyps, streams, tokenized_bleu=tokenized_bleu, lowercase=lowercase)
