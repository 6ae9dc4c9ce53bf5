"""Swapped-word test sets (paper 001, §6.5): a share of each source sentence's words moved at random."""

from __future__ import annotations

import random
from collections.abc import Sequence


def swap_words(words: Sequence[str], fraction: float, rng: random.Random) -> list[str]:
    """Move ``round(fraction · n)`` randomly chosen words of a sentence of n words among their own slots.

    The chosen slots are visited in random order and each word goes to the next slot of the cycle, so
    every chosen word leaves its slot (a cyclic shift, never the identity). A single chosen word cannot
    move alone, so any fraction > 0 moves at least two words when the sentence has two; fraction 1
    permutes the whole sentence.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"swap fraction must lie in [0, 1], got {fraction}")
    count = round(fraction * len(words))
    if fraction > 0 and len(words) >= 2:
        count = max(count, 2)
    if count < 2:
        return list(words)
    slots = rng.sample(range(len(words)), count)
    swapped = list(words)
    for here, there in zip(slots, slots[1:] + slots[:1]):
        swapped[there] = words[here]
    return swapped


def swap_sentences(sentences: Sequence[str], fraction: float, seed: int) -> list[str]:
    """:func:`swap_words` on the whitespace words of every sentence, reproducibly for a ``seed``."""
    rng = random.Random(f"{seed}:{fraction}")
    return [" ".join(swap_words(sentence.split(), fraction, rng)) for sentence in sentences]
