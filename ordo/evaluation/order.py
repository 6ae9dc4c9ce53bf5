"""Word-order measures: RIBES, and the reordering difficulty of a sentence pair from its word alignment.

- RIBES (Isozaki, Hirao, Duh, Sudoh & Tsukada 2010, "Automatic evaluation of translation quality for distant
  language pairs", EMNLP; the WAT metric for Ja<->En): the hypothesis' words are aligned to reference
  positions (:func:`rank_alignment`), their order is scored by the normalized Kendall τ (:func:`normalized_tau`),
  and ``RIBES = NKT · P^α · BP^β`` with P the share of hypothesis words aligned, BP = min(1, exp(1 - r/h)),
  α 0.25, β 0.10; the corpus score is the mean of the sentence scores.
- Reordering difficulty of a (source, target) pair from alignment links (:func:`alignment_tau`): Kendall's τ
  between the aligned source positions and their target positions; and Talbot et al.'s (2011) fuzzy
  reordering score (:func:`fuzzy_reordering`), the share of neighbouring aligned source words that stay
  neighbours, in order, on the target side. :func:`difficulty_buckets` groups a test set by τ.
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ordo.errors import InputError

RIBES_ALPHA = 0.25  # weight of the unigram precision (Isozaki et al. 2010; WAT)
RIBES_BETA = 0.10  # weight of the brevity penalty


class _Ngrams:
    """Occurrence counts and first reference positions of the n-grams of a reference and a hypothesis, each
    n-gram given an id shared by both sentences, built one length at a time as they are asked for: an
    (n+1)-gram's id is that of its first n words paired with its last word, so counting a length costs one pass
    over each sentence, however long the n-grams."""

    def __init__(self, ref: Sequence[str], hyp: Sequence[str]) -> None:
        words: dict[str, int] = {}
        self._words = [[words.setdefault(word, len(words)) for word in tokens] for tokens in (ref, hyp)]
        self._ids: list[list[list[int]]] = []  # [n - 1][0 ref, 1 hyp][start]: the id of the n-gram there
        self._counts: list[tuple[Counter[int], Counter[int]]] = []
        self._first: list[dict[int, int]] = []  # [n - 1]: id -> its first start in the reference

    def _grow(self, size: int) -> None:
        """Index the n-grams of every length up to ``size``."""
        while len(self._ids) < size:
            length = len(self._ids)  # the n-grams indexed so far; the next ones have length + 1 words
            if not length:
                ids = self._words
            else:
                pairs: dict[tuple[int, int], int] = {}
                ids = [[pairs.setdefault((shorter[start], words[start + length]), len(pairs))
                        for start in range(len(words) - length)]
                       for shorter, words in zip(self._ids[-1], self._words)]
            self._ids.append(ids)
            self._counts.append((Counter(ids[0]), Counter(ids[1])))
            first: dict[int, int] = {}
            for start, ngram in enumerate(ids[0]):
                first.setdefault(ngram, start)
            self._first.append(first)

    def counts(self, start: int, size: int) -> tuple[int, int]:
        """Occurrences in the reference and in the hypothesis of the hypothesis' ``size`` words from ``start``."""
        self._grow(size)
        ngram = self._ids[size - 1][1][start]
        ref_counts, hyp_counts = self._counts[size - 1]
        return ref_counts[ngram], hyp_counts[ngram]

    def first(self, start: int, size: int) -> int:
        """The first reference start of the hypothesis' ``size`` words from ``start`` (it is known to occur)."""
        return self._first[size - 1][self._ids[size - 1][1][start]]


def _rank_of(index: int, ngrams: _Ngrams, ref_length: int, hyp_length: int) -> int | None:
    """The reference position of hypothesis word ``index`` (Isozaki et al. 2010, §3.2), or None when unaligned.

    A word that occurs once in each sentence is aligned directly. Otherwise its context grows one word at a time,
    first to the right (``hyp[index:index + k + 1]``), then to the left (``hyp[index - k:index + 1]``), until an
    n-gram occurs exactly once in both sentences; the word takes its place within that n-gram's reference match.
    A side whose n-gram is absent from the reference stays absent as it grows, so the search stops once both
    sides are.
    """
    in_ref, in_hyp = ngrams.counts(index, 1)
    if in_ref == 0:
        return None
    if in_ref == 1 and in_hyp == 1:
        return ngrams.first(index, 1)
    right = left = True  # whether the context on that side may still match
    for width in range(1, min(max(index, hyp_length - index + 1), ref_length)):
        right = right and index + width < hyp_length
        if right:
            in_ref, in_hyp = ngrams.counts(index, width + 1)
            if in_ref == 1 and in_hyp == 1:
                return ngrams.first(index, width + 1)
            right = in_ref > 0
        left = left and width <= index
        if left:
            in_ref, in_hyp = ngrams.counts(index - width, width + 1)
            if in_ref == 1 and in_hyp == 1:
                return ngrams.first(index - width, width + 1) + width
            left = in_ref > 0
        if not (right or left):
            return None
    return None


def rank_alignment(ref: Sequence[str], hyp: Sequence[str]) -> list[int]:
    """The reference positions of the aligned hypothesis words, in hypothesis order ("worder" in the paper)."""
    ngrams = _Ngrams(ref, hyp)
    ranks = (_rank_of(index, ngrams, len(ref), len(hyp)) for index in range(len(hyp)))
    return [rank for rank in ranks if rank is not None]


def normalized_tau(ranks: Sequence[int]) -> float:
    """Normalized Kendall τ, (τ + 1) / 2 = the share of position pairs i < j with ranks[i] < ranks[j].

    Fewer than two aligned words give 0 (τ = -1), the convention of NLTK's RIBES: no order was matched.
    """
    count = len(ranks)
    if count < 2:
        return 0.0
    increasing = sum(1 for i in range(count) for j in range(i + 1, count) if ranks[i] < ranks[j])
    return increasing / (count * (count - 1) / 2)


def sentence_ribes(ref: Sequence[str], hyp: Sequence[str], alpha: float = RIBES_ALPHA,
                   beta: float = RIBES_BETA) -> float:
    """RIBES of one tokenized hypothesis against one reference, in [0, 1]: NKT · P^α · BP^β (Isozaki et al.
    2010, Eq. 2 with the brevity penalty of WAT's RIBES); an empty hypothesis or reference scores 0."""
    if not hyp or not ref:
        return 0.0
    ranks = rank_alignment(ref, hyp)
    precision = len(ranks) / len(hyp)
    brevity = min(1.0, math.exp(1.0 - len(ref) / len(hyp)))
    return normalized_tau(ranks) * precision**alpha * brevity**beta


def corpus_ribes(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Mean sentence RIBES of whitespace-tokenized hypotheses against their references, in [0, 1].

    Raises:
        InputError: when there are not as many references as hypotheses.
    """
    if len(hyps) != len(refs):
        raise InputError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        return 0.0
    return sum(sentence_ribes(ref.split(), hyp.split()) for hyp, ref in zip(hyps, refs)) / len(hyps)


def target_positions(links: Sequence[tuple[int, int]]) -> list[tuple[int, float]]:
    """(source position, mean target position) of each aligned source word, in source order; a word linked
    to several target words stands at their mean position, unaligned words are left out."""
    by_source: dict[int, list[int]] = {}
    for source, target in links:
        by_source.setdefault(source, []).append(target)
    return [(source, sum(targets) / len(targets)) for source, targets in sorted(by_source.items())]


def alignment_tau(links: Sequence[tuple[int, int]]) -> float:
    """Kendall's τ_a between the aligned source positions and their (mean) target positions, in [-1, 1]:
    1 for monotone order, -1 for full reversal. Tied target positions count as neither concordant nor
    discordant; fewer than two aligned source words give 1 (nothing to reorder)."""
    positions = [target for _, target in target_positions(links)]
    count = len(positions)
    if count < 2:
        return 1.0
    pairs = [(positions[i], positions[j]) for i in range(count) for j in range(i + 1, count)]
    concordant = sum(1 for a, b in pairs if a < b)
    discordant = sum(1 for a, b in pairs if a > b)
    return (concordant - discordant) / len(pairs)


def fuzzy_reordering(links: Sequence[tuple[int, int]]) -> float:
    """Talbot et al. (2011)'s fuzzy reordering score 1 - (C - 1) / (M - 1), in [0, 1]: M aligned source
    words in C chunks that are contiguous and monotone on both sides, i.e. the share of neighbouring aligned
    source words whose target ranks are neighbours in order. Fewer than two aligned words give 1."""
    positions = [target for _, target in target_positions(links)]
    count = len(positions)
    if count < 2:
        return 1.0
    order = sorted(range(count), key=lambda i: (positions[i], i))
    rank = {index: r for r, index in enumerate(order)}
    kept = sum(1 for i in range(count - 1) if rank[i + 1] == rank[i] + 1)
    return kept / (count - 1)


def ribes_tokens(texts: Sequence[str], tokenized: bool) -> list[str]:
    """Texts as whitespace tokens for RIBES: as given when ``tokenized`` (e.g. small_parallel_enja), else
    split by sacreBLEU's 13a tokenizer (punctuation apart), the tokenization of its BLEU."""
    if tokenized:
        return list(texts)
    tokenize = _tokenizer_13a()
    return [tokenize(text) for text in texts]


@functools.cache
def _tokenizer_13a() -> Callable[[str], str]:
    """sacreBLEU's 13a tokenizer, one for the process: it keeps the tokens of the lines it has seen (by line, for
    each instance), so the references of every score after the first cost a lookup."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return Tokenizer13a()


@dataclass
class DifficultyBucket:
    """Sentences whose reordering τ lies in ``[low, high]``; lower τ is harder (more reordering)."""

    low: float
    high: float
    indices: list[int]

    @property
    def label(self) -> str:
        """``"τ low..high"`` with two decimals."""
        return f"τ {self.low:.2f}..{self.high:.2f}"


def difficulty_buckets(taus: Sequence[float], edges: Sequence[float] | None = None) -> list[DifficultyBucket]:
    """Sentence indices grouped by τ, hardest first: at ``edges`` (``τ <= e1``, ``e1 < τ <= e2``, ...), or in
    terciles of the sentences (ties kept together, so buckets may be uneven); empty buckets are dropped."""
    if not taus:
        return []
    cuts = sorted(set(edges)) if edges is not None else sorted(
        {float(c) for c in np.quantile(np.asarray(taus), [1 / 3, 2 / 3], method="lower")})
    members: dict[int, list[int]] = {}
    for index, tau in enumerate(taus):
        members.setdefault(bisect_left(cuts, tau), []).append(index)
    return [DifficultyBucket(min(taus[i] for i in indices), max(taus[i] for i in indices), indices)
            for _, indices in sorted(members.items())]
