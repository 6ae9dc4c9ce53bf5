"""Word-order measures (ordo.evaluation.order): RIBES by hand and against NLTK's, τ and the fuzzy
reordering score of alignments by hand."""

import math
import random
from pathlib import Path

import pytest
from nltk.translate.ribes_score import corpus_ribes as nltk_corpus_ribes

from ordo.data.textio import read_lines
from ordo.evaluation.order import (
    alignment_tau,
    corpus_ribes,
    fuzzy_reordering,
    normalized_tau,
    rank_alignment,
    sentence_ribes,
)

ENJA_TEST = Path(__file__).resolve().parents[3] / "shared" / "data" / "small_parallel_enja" / "test.en.gz"


def test_ribes_of_the_reference_itself_is_one_and_of_an_empty_hypothesis_zero():
    ref = ["he", "was", "interested", "in", "world", "history", "because", "he", "read", "the", "book"]
    assert sentence_ribes(ref, ref) == pytest.approx(1.0)
    assert sentence_ribes(ref, []) == 0.0


def test_a_full_reversal_scores_zero_and_a_swap_by_hand():
    ref = ["a", "b", "c", "d"]
    assert rank_alignment(ref, ref[::-1]) == [3, 2, 1, 0]
    assert sentence_ribes(ref, ref[::-1]) == 0.0
    swapped = ["b", "a", "c", "d"]  # 5 of the 6 pairs in order: NKT 5/6, P = BP = 1
    assert sentence_ribes(ref, swapped) == pytest.approx(5 / 6)
    shorter = ["a", "b", "c"]  # NKT 1, P 1, BP exp(1 - 4/3)
    assert sentence_ribes(ref, shorter) == pytest.approx(math.exp(-1 / 3) ** 0.10)


def test_corpus_ribes_refuses_unpaired_lists_rather_than_averaging_over_the_longer():
    from ordo.errors import InputError

    refs = ["a b c d", "e f g h"]
    with pytest.raises(InputError, match="2 hypotheses but 1 references"):
        corpus_ribes(refs, refs[:1])
    with pytest.raises(InputError, match="1 hypotheses but 2 references"):
        corpus_ribes(refs[:1], refs)
    assert corpus_ribes(refs, refs) == pytest.approx(1.0)


def test_repeated_words_are_placed_by_their_unique_context():
    ref = ["the", "boy", "read", "the", "book"]  # Isozaki et al. 2010's (H2, R2), 0-based
    hyp = ["the", "book", "was", "read", "by", "the", "boy"]
    assert rank_alignment(ref, hyp) == [3, 4, 2, 0, 1]
    assert normalized_tau([7, 8, 9, 10, 6, 0, 1, 2, 3, 4, 5]) == pytest.approx(21 / 55)


def test_corpus_ribes_equals_nltks_on_ja_en_tokenized_text():
    refs = read_lines(ENJA_TEST)[:300]
    rng = random.Random(3)
    hyps = []
    for ref in refs:  # outputs with the usual faults: moved chunks, dropped and repeated words, other words
        words = ref.split()
        cut = rng.randrange(len(words) + 1)
        words = words[cut:] + words[:cut] if rng.random() < 0.5 else words
        words = [w for w in words if rng.random() > 0.15] + (["the"] * rng.randrange(3))
        hyps.append(" ".join(w if rng.random() > 0.1 else "xyz" for w in words))
    expected = nltk_corpus_ribes([[r.split()] for r in refs], [h.split() for h in hyps])
    assert corpus_ribes(hyps, refs) == pytest.approx(expected, abs=5e-5)
    assert 0.3 < expected < 0.95  # neither trivial case


def test_alignment_tau_identity_reversal_and_a_hand_case():
    assert alignment_tau([(i, i) for i in range(5)]) == 1.0
    assert alignment_tau([(i, 4 - i) for i in range(5)]) == -1.0
    # source 1 -> targets 2 and 3 (mean 2.5), source 3 unaligned: positions 0, 2.5, 1, 4 -> 5 concordant, 1 not
    links = [(0, 0), (1, 2), (1, 3), (2, 1), (4, 4)]
    assert alignment_tau(links) == pytest.approx(4 / 6)
    assert alignment_tau([(0, 3)]) == 1.0


def test_fuzzy_reordering_counts_neighbours_that_stay_neighbours():
    assert fuzzy_reordering([(i, i) for i in range(5)]) == 1.0
    assert fuzzy_reordering([(i, 4 - i) for i in range(5)]) == 0.0
    assert fuzzy_reordering([(0, 0), (1, 1), (2, 3), (3, 2)]) == pytest.approx(1 / 3)
    assert fuzzy_reordering([(0, 0), (1, 1), (1, 2), (3, 3)]) == 1.0  # one-to-many at its mean, gaps ignored


def test_difficulty_buckets_cover_every_sentence_hardest_first():
    from ordo.evaluation.order import difficulty_buckets

    taus = [0.9, -0.2, 0.5, 1.0, 0.1, 0.7, -0.6, 0.3, 1.0]
    buckets = difficulty_buckets(taus)
    assert sorted(i for b in buckets for i in b.indices) == list(range(len(taus)))
    assert len(buckets) == 3 and buckets[0].high < buckets[1].low and buckets[1].high < buckets[2].low
    assert [len(b.indices) for b in difficulty_buckets(taus, edges=[0.0])] == [2, 7]
    assert difficulty_buckets([]) == []


def _rank_by_definition(index, ref, hyp):
    """Isozaki et al. 2010's rule as written (§3.2), n-grams counted afresh: the oracle of the fast code."""

    def count(tokens, ngram):
        return sum(tuple(tokens[s:s + len(ngram)]) == ngram for s in range(len(tokens) - len(ngram) + 1))

    def first(tokens, ngram):
        return next(s for s in range(len(tokens)) if tuple(tokens[s:s + len(ngram)]) == ngram)

    word = hyp[index]
    if ref.count(word) == 0:
        return None
    if ref.count(word) == 1 and hyp.count(word) == 1:
        return ref.index(word)
    for width in range(1, min(max(index, len(hyp) - index + 1), len(ref))):
        if index + width < len(hyp):
            right = tuple(hyp[index:index + width + 1])
            if count(ref, right) == 1 and count(hyp, right) == 1:
                return first(ref, right)
        if width <= index:
            left = tuple(hyp[index - width:index + 1])
            if count(ref, left) == 1 and count(hyp, left) == 1:
                return first(ref, left) + width
    return None


def test_rank_alignment_gives_the_rule_as_written_on_varied_inputs():
    rng = random.Random(5)
    for case in range(400):
        vocab = "abcdefgh"[: rng.randint(1, 8)]  # few word types: repeats and long shared contexts
        ref = [rng.choice(vocab) for _ in range(rng.randint(0, 25))]
        if case % 3 == 0:  # an output that is a copy of the reference with faults
            hyp = [w for w in ref if rng.random() > 0.2] + [rng.choice(vocab)] * rng.randint(0, 6)
        else:
            hyp = [rng.choice(vocab + "xy") for _ in range(rng.randint(0, 25))]
        expected = [r for r in (_rank_by_definition(i, ref, hyp) for i in range(len(hyp))) if r is not None]
        assert rank_alignment(ref, hyp) == expected, (ref, hyp)


def test_ribes_of_a_long_output_of_one_repeated_word_takes_no_time():
    import time

    start = time.perf_counter()
    assert sentence_ribes(["a"] * 150, ["a"] * 200) == 0.0
    assert sentence_ribes(["a"] + ["b"] * 100, ["b"] * 300) == 0.0
    assert time.perf_counter() - start < 0.5
