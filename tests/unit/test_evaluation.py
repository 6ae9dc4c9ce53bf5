"""Tests for ordo.evaluation: BLEU/chrF, multi-bleu.perl BLEU, sufficient statistics, significance."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from ordo.errors import InputError
from ordo.evaluation.bleu import (
    bleu_from_stats,
    corpus_scores,
    multi_bleu,
    read_systems,
    sacrebleu_bleu,
    score_files,
    sentence_stats,
)
from ordo.evaluation.significance import (
    bleu_bootstrap_p,
    compare_systems,
    paired_bootstrap_mean,
    paired_tests,
    sign_test,
    sign_test_p_value,
)

WORDS = [
    "the", "a", "cat", "dog", "mat", "house", "sat", "ran", "saw", "under", "over", "near", "big", "small", "red",
    "old",
]


def _sentences(num: int, seed: int) -> list[str]:
    """Detokenized-looking sentences: capitalised, a comma sometimes, a final period."""
    rng = random.Random(seed)
    lines = []
    for _ in range(num):
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 12))]
        if rng.random() < 0.5:
            words[2] += ","
        lines.append(" ".join(words).capitalize() + ".")
    return lines


def _corrupt(lines: list[str], seed: int) -> list[str]:
    """Replace one word per sentence by an unknown word (length kept, so only matches drop)."""
    rng = random.Random(seed)
    noisy = []
    for line in lines:
        words = line.split()
        words[rng.randrange(len(words))] = "zzz"
        noisy.append(" ".join(words))
    return noisy


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# --- multi-bleu.perl BLEU ---------------------------------------------------------------------------


def test_multi_bleu_is_100_for_identical_text() -> None:
    lines = _sentences(20, seed=1)
    assert multi_bleu(lines, lines) == pytest.approx(100.0)


def test_multi_bleu_is_zero_without_a_4gram_match() -> None:
    # Unigram to trigram precisions are positive, but "a b c d" has no 4-gram in "a b c e".
    assert multi_bleu(["a b c d"], ["a b c e"]) == 0.0
    # Sentences shorter than 4 tokens have no 4-grams at all: precision 0/0 counts as 0.
    assert multi_bleu(["a b c"], ["a b c"]) == 0.0


def test_multi_bleu_hand_computed_clipping() -> None:
    # hyp "the cat sat on the mat", ref "the cat sat on a mat" (c = r = 6, BP = 1):
    #   1-grams: the(2, clipped to 1) cat sat on mat -> 5/6
    #   2-grams: the-cat cat-sat sat-on | on-the the-mat -> 3/5
    #   3-grams: the-cat-sat cat-sat-on | sat-on-the on-the-mat -> 2/4
    #   4-grams: the-cat-sat-on | cat-sat-on-the sat-on-the-mat -> 1/3
    # BLEU = (5/6 * 3/5 * 2/4 * 1/3) ** (1/4) = (1/12) ** (1/4)
    assert multi_bleu(["the cat sat on the mat"], ["the cat sat on a mat"]) == pytest.approx(
        100.0 * (1 / 12) ** 0.25
    )


def test_multi_bleu_hand_computed_brevity_penalty() -> None:
    # Every n-gram of "the cat sat on" is in the reference: precisions 4/4, 3/3, 2/2, 1/1.
    # c = 4 < r = 6, so BP = exp(1 - 6/4) = exp(-0.5).
    assert multi_bleu(["the cat sat on"], ["the cat sat on the mat"]) == pytest.approx(100.0 * math.exp(-0.5))


def test_multi_bleu_brevity_penalty_is_corpus_level() -> None:
    hyps = ["a b c d", "e f g h i j k l"]
    refs = ["a b c d x y", "e f g h i j"]
    # Sentence 1 is 2 tokens short and sentence 2 is 2 tokens long: summed c = r = 12, so BP = 1
    # (a per-sentence penalty would punish sentence 1). Sentence 1's n-grams all match (4/4, 3/3,
    # 2/2, 1/1); sentence 2 matches e..j but not k, l: 6/8, 5/7, 4/6, 3/5.
    matches = [4 + 6, 3 + 5, 2 + 4, 1 + 3]
    totals = [4 + 8, 3 + 7, 2 + 6, 1 + 5]
    expected = 100.0 * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals)) / 4)
    assert multi_bleu(hyps, refs) == pytest.approx(expected)


def test_multi_bleu_case_sensitive_unless_lowercase() -> None:
    hyps, refs = ["The Cat sat on the mat"], ["the cat sat on the mat"]
    assert multi_bleu(hyps, refs) < 100.0
    assert multi_bleu(hyps, refs, lowercase=True) == pytest.approx(100.0)


def test_the_dev_bleu_of_tokenized_text_scores_as_sacrebleu_without_its_warning(caplog) -> None:
    hyps = [f"{line[:-1]} ." for line in _sentences(120, seed=3)]  # 120 lines ending in a tokenized period
    refs = [f"{line[:-1]} ." for line in _sentences(120, seed=4)]
    with caplog.at_level("WARNING", logger="sacrebleu"):
        warned = sacrebleu_bleu(hyps, refs)
    assert "forgot to detokenize" in caplog.text  # sacreBLEU's own warning, by default
    caplog.clear()
    with caplog.at_level("WARNING", logger="sacrebleu"):
        quiet = sacrebleu_bleu(hyps, refs, warn_tokenized=False)
    assert caplog.text == "" and quiet == warned == pytest.approx(BLEU().corpus_score(hyps, [refs]).score)
    with pytest.raises(InputError):
        sacrebleu_bleu(hyps, refs[:-1], warn_tokenized=False)


def test_multi_bleu_equals_sacrebleu_without_tokenization() -> None:
    # On whitespace-tokenized text with every precision positive both compute the same thing.
    refs = _sentences(30, seed=2)
    hyps = [line.split()[:-1] for line in _corrupt(refs, seed=3)]  # shorter: BP < 1
    hyps_text = [" ".join(words) for words in hyps]
    expected = BLEU(tokenize="none", force=True).corpus_score(hyps_text, [refs]).score
    assert multi_bleu(hyps_text, refs) == pytest.approx(expected)


# --- sacreBLEU scores and sufficient statistics ----------------------------------------------------


def test_corpus_scores_keys_and_tokenized_bleu() -> None:
    refs = _sentences(10, seed=4)
    hyps = _corrupt(refs, seed=5)
    scores = corpus_scores(hyps, refs)
    assert set(scores) == {"bleu", "chrf", "bleu_signature", "chrf_signature"}
    assert 0.0 < float(scores["bleu"]) < 100.0 and 0.0 < float(scores["chrf"]) < 100.0
    assert "tok:13a" in str(scores["bleu_signature"])
    with_tok = corpus_scores(hyps, refs, tokenized_bleu=True, lowercase=True)
    assert with_tok["tok_bleu"] == pytest.approx(multi_bleu(hyps, refs, lowercase=True))
    assert "case:lc" in str(with_tok["bleu_signature"])


@pytest.mark.parametrize("lowercase", [False, True])
def test_summed_sentence_stats_reproduce_sacrebleu(lowercase: bool) -> None:
    refs = _sentences(25, seed=6)
    hyps = _corrupt(refs, seed=7)
    stats = sentence_stats(hyps, refs, lowercase=lowercase)
    assert stats.shape == (25, 10)
    expected = BLEU(lowercase=lowercase).corpus_score(hyps, [refs]).score
    assert float(bleu_from_stats(stats.sum(axis=0))) == pytest.approx(expected, abs=1e-9)


def test_summed_stats_reproduce_sacrebleu_smoothing() -> None:
    # An unknown word after every two reference words: no 3-gram or 4-gram can match, so
    # sacreBLEU's exp smoothing (halving per unmatched order) decides the score.
    refs = [line.replace(",", "").rstrip(".") for line in _sentences(8, seed=8)]
    hyps = []
    for line in refs:
        words = line.split()
        hyps.append(" ".join(" ".join(words[i : i + 2]) + " zzz" for i in range(0, len(words), 2)))
    stats = sentence_stats(hyps, refs).sum(axis=0)
    assert stats[4] == stats[5] == 0  # no 3-gram or 4-gram matched
    expected = BLEU().corpus_score(hyps, [refs]).score
    assert expected > 0.0
    assert float(bleu_from_stats(stats)) == pytest.approx(expected, abs=1e-9)


def test_bleu_from_stats_of_part_of_the_corpus_is_that_part_s_sacrebleu_score() -> None:
    refs = _sentences(12, seed=10)
    hyps = _corrupt(refs, seed=11)
    stats = sentence_stats(hyps, refs)
    expected = BLEU().corpus_score(hyps[6:], [refs[6:]]).score
    assert bleu_from_stats(stats[6:].sum(axis=0)) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(("hyps", "refs"), [(["a"], ["a", "b"]), ([], [])])
def test_corpus_scores_rejects_mismatched_or_empty(hyps: list[str], refs: list[str]) -> None:
    with pytest.raises(InputError):
        corpus_scores(hyps, refs)
    with pytest.raises(InputError):
        multi_bleu(hyps, refs)


def test_a_single_string_is_refused_rather_than_scored_character_by_character() -> None:
    with pytest.raises(InputError, match="hypotheses: expected a list of sentences, got one string"):
        corpus_scores("a cat sat", "a cat sat .")
    with pytest.raises(InputError, match="references: expected a list of sentences, got one string"):
        corpus_scores(["a", "b", "c"], "abc")
    refs = _sentences(3, seed=30)
    with pytest.raises(InputError, match="hypotheses: expected a list of sentences, got one string"):
        sign_test(refs, "abc", refs)


def test_paired_tests_refuse_reference_streams_with_a_clear_error() -> None:
    refs = _sentences(4, seed=31)
    hyps = _corrupt(refs, seed=32)
    assert corpus_scores(hyps, [refs]) == corpus_scores(hyps, refs)  # one stream is fine for the scores
    with pytest.raises(InputError, match="one reference per sentence"):
        paired_tests(hyps, refs, [refs], bootstrap_samples=10, randomization_trials=10)
    with pytest.raises(InputError, match="one reference per sentence"):
        sign_test(hyps, refs, [refs])


def test_score_files_names_both_files_on_length_mismatch(tmp_path: Path) -> None:
    hyp = _write(tmp_path / "hyp.txt", ["a b", "c d"])
    ref = _write(tmp_path / "ref.txt", ["a b", "c d", "e f"])
    with pytest.raises(InputError, match="hyp.txt.*ref.txt"):
        score_files(hyp, ref)


def test_score_files_matches_corpus_scores(tmp_path: Path) -> None:
    refs = _sentences(5, seed=12)
    hyps = _corrupt(refs, seed=13)
    scores = score_files(_write(tmp_path / "hyp", hyps), _write(tmp_path / "ref", refs), tokenized_bleu=True)
    assert scores == corpus_scores(hyps, refs, tokenized_bleu=True)


# --- sign test (Collins et al., 2005) ---------------------------------------------------------------


def test_binomial_p_value_hand_case() -> None:
    # 9 better, 1 worse: P(X <= 1) = (C(10,0) + C(10,1)) / 2**10 = 11/1024; two-sided doubles it.
    assert sign_test_p_value(9, 1) == pytest.approx(22 / 1024, rel=1e-12)
    assert sign_test_p_value(1, 9) == pytest.approx(22 / 1024, rel=1e-12)
    assert sign_test_p_value(5, 5) == 1.0
    assert sign_test_p_value(0, 0) == 1.0


@pytest.mark.parametrize(("better", "worse"), [(120, 80), (30, 170), (101, 99)])
def test_binomial_p_value_matches_exact_fraction(better: int, worse: int) -> None:
    n, k = better + worse, min(better, worse)
    exact = min(Fraction(1), 2 * Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2**n))
    assert sign_test_p_value(better, worse) == pytest.approx(float(exact), rel=1e-9)


def test_sign_test_reference_copies_beat_noisy_system() -> None:
    refs = _sentences(40, seed=14)
    result = sign_test(_corrupt(refs, seed=15), refs, refs)
    assert result.better > result.worse
    assert result.better + result.worse + result.ties == 40
    assert result.p_value < 0.01


def test_sign_test_identical_systems_are_all_ties() -> None:
    refs = _sentences(15, seed=16)
    hyps = _corrupt(refs, seed=17)
    result = sign_test(hyps, hyps, refs)
    assert (result.better, result.worse, result.ties, result.p_value) == (0, 0, 15, 1.0)


def test_sign_test_rejects_systems_of_different_length() -> None:
    refs = _sentences(3, seed=18)
    with pytest.raises(InputError):
        sign_test(refs, refs[:2], refs)


# --- sacreBLEU's paired tests: bootstrap resampling and approximate randomization ---------------------


def _mirrored(num: int, seed: int) -> tuple[list[str], list[str], list[str]]:
    """References whose second half repeats the first; A corrupts the first half, B the same sentences of
    the second half in the same way. The systems differ on every corrupted line but score the same."""
    half = _sentences(num // 2, seed=seed)
    noisy = _corrupt(half, seed=seed + 1)
    return noisy + half, half + noisy, half + half


def test_paired_tests_find_the_clearly_better_system() -> None:
    refs = _sentences(30, seed=21)
    hyps_a = _corrupt(_corrupt(refs, seed=22), seed=23)
    comparisons = paired_tests(hyps_a, refs, refs, bootstrap_samples=200, randomization_trials=500)
    assert [c.metric for c in comparisons] == ["BLEU", "chrF2", "TER"]
    bleu, chrf, ter = comparisons
    assert bleu.score_b > bleu.score_a and chrf.score_b > chrf.score_a and ter.score_b < ter.score_a
    for comparison in comparisons:
        assert comparison.bootstrap_p < 0.01
        assert comparison.randomization_p < 0.01
        assert comparison.ci_a > 0.0
        assert "bs:200" in comparison.bootstrap_signature and "ar:500" in comparison.randomization_signature


def test_paired_tests_of_equal_scores_are_not_significant() -> None:
    hyps_a, hyps_b, refs = _mirrored(40, seed=24)
    for comparison in paired_tests(hyps_a, hyps_b, refs, bootstrap_samples=200, randomization_trials=500):
        assert comparison.score_a == pytest.approx(comparison.score_b)
        assert comparison.bootstrap_p > 0.2
        assert comparison.randomization_p > 0.2


def test_paired_tests_of_a_system_against_itself_give_p_one() -> None:
    refs = _sentences(20, seed=19)
    hyps = _corrupt(refs, seed=20)
    for comparison in paired_tests(hyps, hyps, refs, bootstrap_samples=50, randomization_trials=50):
        assert (comparison.bootstrap_p, comparison.randomization_p) == (1.0, 1.0)
        assert comparison.score_a == comparison.score_b


def test_paired_tests_of_different_outputs_with_the_same_score_give_p_one() -> None:
    """No 4-gram matches: both BLEU 0 in every resample, a difference of 0 that sacreBLEU's strict count would
    give its smallest p-value, 1 / (samples + 1)."""
    refs = ["the cat sat .", "a dog ran ."]
    hyps_a, hyps_b = ["the cat .", "a dog ."], ["cat sat .", "dog ran ."]
    (bleu,) = paired_tests(hyps_a, hyps_b, refs, bootstrap_samples=20, randomization_trials=20, metrics=["bleu"])
    assert bleu.score_a == bleu.score_b == 0.0
    assert (bleu.bootstrap_p, bleu.randomization_p) == (1.0, 1.0)


def test_bleu_bootstrap_p_is_the_bleu_bootstrap_of_paired_tests() -> None:
    refs = _sentences(30, seed=25)
    hyps_a, hyps_b = _corrupt(refs, seed=26), _corrupt(refs, seed=27)
    bleu = paired_tests(hyps_a, hyps_b, refs, bootstrap_samples=100, randomization_trials=10, metrics=["bleu"])
    assert [c.metric for c in bleu] == ["BLEU"]
    assert bleu_bootstrap_p(hyps_a, hyps_b, refs, num_samples=100) == bleu[0].bootstrap_p


def test_paired_tests_reject_bad_arguments() -> None:
    refs = _sentences(3, seed=28)
    with pytest.raises(InputError):
        paired_tests(refs, refs[:2], refs)
    with pytest.raises(InputError, match="at least 1"):
        paired_tests(refs, refs, refs, bootstrap_samples=0)
    with pytest.raises(InputError, match="unknown metric"):
        paired_tests(refs, refs, refs, metrics=["meteor"])


# --- paired bootstrap of a mean of sentence scores (RIBES) ----------------------------------------------


def test_mean_bootstrap_finds_the_clearly_better_system() -> None:
    rng = random.Random(29)
    scores_a = [rng.uniform(0.2, 0.6) for _ in range(40)]
    scores_b = [score + 0.2 for score in scores_a]
    assert paired_bootstrap_mean(scores_a, scores_b, num_samples=200) < 0.01
    assert paired_bootstrap_mean(scores_b, scores_a, num_samples=200) < 0.01


def test_mean_bootstrap_of_equal_means_is_not_significant() -> None:
    rng = random.Random(30)
    half = [rng.uniform(0.0, 1.0) for _ in range(20)]
    lower = [score / 2 for score in half]
    assert paired_bootstrap_mean(lower + half, half + lower, num_samples=200) > 0.2
    assert paired_bootstrap_mean(half, half, num_samples=200) == 1.0


def test_mean_bootstrap_rejects_unpaired_scores() -> None:
    with pytest.raises(InputError):
        paired_bootstrap_mean([0.1, 0.2], [0.1])
    with pytest.raises(InputError):
        paired_bootstrap_mean([], [])


def test_read_systems_names_the_mismatched_file_and_reads_a_pipe_once(tmp_path: Path, pipe) -> None:
    refs = _sentences(4, seed=26)
    ref = _write(tmp_path / "ref.txt", refs)
    good = _write(tmp_path / "base.txt", _corrupt(refs, seed=27))
    short = _write(tmp_path / "short.txt", refs[:3])
    with pytest.raises(InputError, match="short.txt has 3 lines but .*ref.txt has 4"):
        read_systems([good, short], [ref])
    with pipe("ref.fifo", "".join(f"{r}\n" for r in refs)) as piped:  # as the shell's --ref <(zcat ref.gz)
        (hyps_a, hyps_b), (read_refs,) = read_systems([good, ref], [piped])
    assert read_refs == refs and hyps_b == refs and len(hyps_a) == 4
    report = compare_systems(hyps_a, hyps_b, read_refs, bootstrap_samples=50, randomization_trials=50)
    assert set(report) == {"paired_tests", "sign_test"}
    assert set(report["paired_tests"]) == {"BLEU", "chrF2", "TER"}
    assert report["sign_test"]["better"] == 4


def test_tokenized_text_warns_only_when_not_declared_tokenized(caplog):
    from ordo.evaluation.bleu import corpus_scores

    lines = [f"line {i} ends with a period ." for i in range(120)]
    with caplog.at_level("WARNING", logger="sacrebleu"):
        corpus_scores(lines, lines, tokenized_bleu=True)
    assert "detokenize" not in caplog.text
    with caplog.at_level("WARNING", logger="sacrebleu"):
        corpus_scores(lines, lines)
    assert "detokenize" in caplog.text
