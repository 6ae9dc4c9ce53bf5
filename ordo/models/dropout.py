"""Inverted dropout with a cheaper mask on the CPU."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

MASK_LEVELS = 1 << 16  # the CPU mask compares 16-bit random integers: p is rounded to a multiple of 1 / 65536


def keep_mask(shape: torch.Size, p: float) -> tuple[torch.Tensor, float]:
    """A bool mask of ``shape`` (True = kept) and its keep probability, from 16 random bits per element.

    Each element drops with probability p_q = round(p · 65536) / 65536 (|p_q - p| <= 2^-17): the 64 random
    bits of one full-range int64 draw are read as four int16 levels, and a level below the p_q quantile drops.
    One draw serves four elements, where ``rand >= p`` draws a uniform float for each.
    """
    numel = math.prod(shape)
    bits = torch.empty((numel + 3) // 4, dtype=torch.int64).random_(-(2**63), None)  # 64 random bits each
    levels = bits.view(torch.int16)[:numel].view(shape)  # uniform over [-32768, 32767]
    drop_levels = round(p * MASK_LEVELS)
    return levels >= drop_levels - MASK_LEVELS // 2, 1.0 - drop_levels / MASK_LEVELS


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Inverted dropout (Srivastava et al. 2014): each element is zeroed with probability ``p`` and the rest
    are scaled by 1 / (1 - p), so the expectation is ``x``; the identity when not ``training`` or ``p`` is 0.

    On the CPU the mask is :func:`keep_mask` (p rounded to a multiple of 1/65536, the scale from the rounded
    p, so the expectation stays ``x`` exactly): one 64-bit draw per four elements, where a ``rand >= p`` mask
    and ``F.dropout``'s ``bernoulli_`` draw one per element; on other devices it is ``F.dropout`` (a fused
    kernel).
    """
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or round(p * MASK_LEVELS) >= MASK_LEVELS:
        return F.dropout(x, p, True)
    keep, keep_prob = keep_mask(x.shape, p)
    return x * keep.to(x.dtype).mul_(1.0 / keep_prob)
