"""Contrastive word-order variants and their statistics (ordo.analysis.contrastive): each variant is the same words
in another order of its kind, reproducible by seed; the source-order variant on hand-aligned pairs; Wilson's
interval and McNemar's test on hand-made cases."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from ordo.analysis.contrastive import (
    MOVE_DISTANCE,
    ProbeResult,
    margin_lines,
    move_far,
    probe_rows,
    reverse_words,
    seed_rows,
    source_order_variants,
    source_ordered,
    swap_adjacent,
    word_order_variants,
)

SENTENCE = ["the", "old", "man", "gave", "the", "girl", "a", "red", "book", "yesterday"]


def moved_word(words: list[str], start: int, end: int) -> list[str]:
    """``words`` with the word at ``start`` taken out and put back at ``end``."""
    moved = list(words)
    moved.insert(end, moved.pop(start))
    return moved


@pytest.mark.parametrize("seed", range(20))
def test_each_kind_reorders_the_same_words_as_it_says(seed):
    rng = random.Random(seed)
    swapped, moved = swap_adjacent(SENTENCE, rng), move_far(SENTENCE, rng)
    for variant in (swapped, moved):
        assert variant is not None and Counter(variant) == Counter(SENTENCE) and variant != SENTENCE
    changed = [i for i, (a, b) in enumerate(zip(swapped, SENTENCE)) if a != b]
    assert len(changed) == 2 and changed[1] == changed[0] + 1
    assert any(moved == moved_word(SENTENCE, start, end) for start in range(len(SENTENCE))
               for end in range(len(SENTENCE)) if abs(end - start) >= MOVE_DISTANCE)
    assert reverse_words(SENTENCE, rng) == SENTENCE[::-1]


def test_a_kind_that_cannot_change_a_sentence_leaves_it_out():
    rng = random.Random(0)
    for words in (["one"], ["so", "so", "so", "so", "so"], []):
        assert swap_adjacent(words, rng) is None and move_far(words, rng) is None and reverse_words(words, rng) is None
    assert move_far(["a", "b", "c"], rng) is None  # no slot MOVE_DISTANCE away
    assert reverse_words(["ha", "x", "ha"], rng) is None


def test_variants_are_reproducible_by_seed():
    refs = [" ".join(SENTENCE), "a b", "single", "w x y z v"]
    assert word_order_variants(refs, "move", seed=3) == word_order_variants(refs, "move", seed=3)
    assert word_order_variants(refs, "swap", seed=3)[2] is None
    draws = {tuple(word_order_variants(refs, "swap", seed=seed)) for seed in range(6)}
    assert len(draws) > 1


def test_the_source_order_variant_puts_a_reference_in_its_sources_word_order():
    """English "I have seen the man ." against German "ich habe den Mann gesehen .": the participle goes back
    beside the auxiliary as in English; the unaligned full stop keeps its slot."""
    links = [(0, 0), (1, 1), (2, 4), (3, 2), (4, 3)]
    german = ["ich", "habe", "den", "Mann", "gesehen", "."]
    assert source_ordered(german, links) == ["ich", "habe", "gesehen", "den", "Mann", "."]
    assert source_ordered(german, [(0, 0), (1, 1), (2, 2)]) is None  # monotone: no variant


def test_two_target_words_of_one_source_word_keep_their_order():
    """Words with the same key (one source word) stay in their own order; a word aligned to two source words
    sits at the mean of their positions."""
    links = [(0, 2), (0, 3), (1, 1), (2, 0), (3, 0), (2, 4)]  # target 0 aligns to source 2 and 3: key 2.5
    assert source_ordered(["a", "b", "c", "d", "e"], links) == ["c", "d", "b", "e", "a"]


@pytest.mark.parametrize("seed", range(10))
def test_a_permuted_copy_of_the_source_goes_back_to_the_source(seed):
    """A reference that is the source's words shuffled, aligned word to word, comes back as the source."""
    rng = random.Random(seed)
    source = [f"w{i}" for i in range(rng.randint(2, 12))]
    order = list(range(len(source)))
    rng.shuffle(order)
    reference = [source[i] for i in order]
    links = [(source_word, target_word) for target_word, source_word in enumerate(order)]
    expected = None if reference == source else source
    assert source_ordered(reference, links) == expected
    assert source_order_variants([" ".join(reference)], [links]) == [None if expected is None else " ".join(source)]


def wilson(right: int, total: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = right / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return centre - half, centre + half


def test_accuracy_interval_and_mcnemar_on_hand_made_rankings():
    system = ProbeResult("B", "swap", {0: True, 1: True, 2: True, 3: False}, {0: 1.0, 1: 2.0, 2: 0.5, 3: -1.5})
    baseline = ProbeResult("A", "swap", {0: True, 1: False, 2: False, 3: False}, {0: 1.0, 1: -1.0, 2: -2.0, 3: -1.0})
    assert system.accuracy == 0.75
    assert system.interval == pytest.approx(wilson(3, 4))
    assert system.mcnemar_p(baseline) == pytest.approx(0.5)  # 2 pairs only B ranks right, none only A: 2 * 1/4
    rows = probe_rows([baseline, system])
    assert rows[0][-1] is None and rows[1][-1] == "0.5"
    assert rows[1][2:4] == [4, 75.0] and rows[1][5] == pytest.approx(0.5)


def ranked(name: str, right: int, kind: str = "source-order") -> ProbeResult:
    """A run's result on 4 pairs, ``right`` of them ranked right, each pair's margin +1 if right, else -1."""
    return ProbeResult(name, kind, {i: i < right for i in range(4)}, {i: 1.0 if i < right else -1.0 for i in range(4)})


def test_seed_rows_compare_systems_over_their_runs_by_a_t_test():
    """Runs at 50 / 75 / 100% against 75 / 100 / 100%: gain 16.67, pooled sd √(1250/3), standard error 16.67,
    t = 1 at 4 degrees of freedom (p 0.374), interval ± t_{0.975, 4} x 16.67; margins move with the shares
    (-1..+1 per pair), 2 x 16.67 / 100 apart."""
    systems = {"base": [ranked("base:1", 2), ranked("base:2", 3), ranked("base:3", 4)],
               "new": [ranked("new:1", 3), ranked("new:2", 4), ranked("new:3", 4)]}
    base_row, new_row = seed_rows(systems)
    assert base_row == ["base", "source-order", 3, "75.00 (25.00)", None, None, "0.50 (0.50)", None, None]
    half = 2.7764451051977987 * 50 / 3
    assert new_row[:4] == ["new", "source-order", 3, "91.67 (14.43)"]
    assert new_row[4] == f"{50 / 3:+.2f} [{50 / 3 - half:+.2f}, {50 / 3 + half:+.2f}]" and new_row[5] == "0.374"
    assert new_row[7].startswith(f"{1 / 3:+.2f} [") and new_row[8] == "0.374"


def test_one_run_a_side_gives_no_seed_test():
    rows = seed_rows({"base": [ranked("base", 2)], "new": [ranked("new", 3)]})
    assert rows[1][3:6] == ["75.00", None, None]


def test_margin_lines_give_every_pair_under_every_run_by_test_line():
    first = [ProbeResult("a", "swap", {0: True, 2: False}, {0: 1.5, 2: -0.25}),
             ProbeResult("a", "source-order", {1: True}, {1: 3.0})]
    second = [ProbeResult("b", "swap", {0: True, 2: True}, {0: 2.0, 2: 0.125}),
              ProbeResult("b", "source-order", {1: False}, {1: -1.0})]
    assert margin_lines([*first, *second]) == [
        "line\tvariant\ta\tb\n", "1\tswap\t1.5000\t2.0000\n", "3\tswap\t-0.2500\t0.1250\n",
        "2\tsource-order\t3.0000\t-1.0000\n",
    ]
