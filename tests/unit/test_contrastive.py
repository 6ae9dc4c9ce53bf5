"""Contrastive word-order variants and their statistics (ordo.analysis.contrastive): each variant is the same words
in another order of its kind, reproducible by seed; Wilson's interval and McNemar's test on hand-made cases."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from ordo.analysis.contrastive import (
    MOVE_DISTANCE,
    ProbeResult,
    move_far,
    probe_rows,
    reverse_words,
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
