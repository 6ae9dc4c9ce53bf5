"""Target-order positions R of a source sentence from its word alignment (paper 000 §4.1;
docs/methods.md, "Explicit reordering").

R = (r_1..r_J) is a permutation of the source positions: word j moves to slot r_j of the "target-ordered
source". The key of an aligned word is the mean of its aligned target positions; unaligned words keep their
own slot ("we remain the positions of unaligned source words"); aligned words fill the remaining slots in
order of key, ties broken by source position (a stable sort). Alignments are on words; a word's subword
pieces follow it and keep their inner order (:func:`piece_positions`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from ordo.data.alignment.links import Link


def target_order(src_len: int, links: Iterable[Link]) -> list[int]:
    """0-based slot r_j of every source word j of a sentence of ``src_len`` words (paper 000 §4.1)."""
    targets: dict[int, list[int]] = defaultdict(list)
    for src, tgt in links:
        targets[src].append(tgt)
    aligned = sorted(targets, key=lambda j: (sum(targets[j]) / len(targets[j]), j))
    free_slots = [j for j in range(src_len) if j in targets]  # the slots the aligned words share
    slots = list(range(src_len))  # unaligned words keep their own
    for slot, word in zip(free_slots, aligned):
        slots[word] = slot
    return slots


def reorder_words(words: Sequence[str], slots: Sequence[int]) -> list[str]:
    """The target-ordered sentence: word j placed at slot r_j (the oracle input of paper 000, Figure 2)."""
    ordered = [""] * len(words)
    for word, slot in zip(words, slots):
        ordered[slot] = word
    return ordered


def piece_positions(slots: Sequence[int], pieces_per_word: Sequence[int]) -> list[int]:
    """0-based target-order position of every subword piece: the pieces of word j occupy consecutive
    positions, starting after all pieces of the words placed before slot r_j.

    Args:
        slots: word-level R from :func:`target_order`.
        pieces_per_word: number of pieces of each source word (same length as ``slots``).
    """
    by_slot = sorted(range(len(slots)), key=lambda j: slots[j])
    start = [0] * len(slots)
    position = 0
    for word in by_slot:
        start[word] = position
        position += pieces_per_word[word]
    return [start[word] + k for word, count in enumerate(pieces_per_word) for k in range(count)]
