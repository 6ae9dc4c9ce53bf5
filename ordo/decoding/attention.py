"""The attention a model pays to the source while it produces a given target, and word links read off it.

Under forced decoding (teacher forcing on a known target, e.g. the model's own translation) the attention
matrix of a sentence pair is (target pieces + EOS, source pieces + EOS):

- the Transformer's is the cross-attention of the last decoder layer, averaged over heads; its module runs
  on fused kernels that return no weights, so a forward hook recomputes ``softmax(q k^T / sqrt(d_h))`` from
  the module's own projections and inputs;
- the attention RNN returns its alignments itself (``extras["alignment"]``, paper 003).

Words are pooled from pieces as ``ordo align --model`` does: mean over a target word's pieces, sum over a
source word's pieces; every target word is linked to the source word it attends to most.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from ordo.data.alignment.links import Link
from ordo.data.batch import Batch
from ordo.models.attention import CrossAttention, split_heads
from ordo.models.outputs import Seq2SeqOutput

ALIGNMENT = "alignment"  # the extras key of (B, T, S) attention weights a model returns itself


def pool_to_words(attention: np.ndarray, src_counts: Sequence[int], tgt_counts: Sequence[int]) -> np.ndarray:
    """(T pieces, S pieces) attention -> (target words, source words): mean over target, sum over source pieces."""
    src_edges = np.cumsum([0, *src_counts])
    tgt_edges = np.cumsum([0, *tgt_counts])
    by_source = np.add.reduceat(attention[:, : src_edges[-1]], src_edges[:-1], axis=1)  # (T, words_s)
    sums = np.add.reduceat(by_source[: tgt_edges[-1]], tgt_edges[:-1], axis=0)  # (words_t, words_s)
    return sums / np.asarray(tgt_counts, dtype=np.float64)[:, None]


def hard_links(word_attention: np.ndarray) -> set[Link]:
    """Each target word linked to its most attended source word."""
    return {(int(src), tgt) for tgt, src in enumerate(word_attention.argmax(axis=1))}


def head_averaged_weights(
    module: CrossAttention, queries: torch.Tensor, memory: torch.Tensor, attn_mask: torch.Tensor | None
) -> torch.Tensor:
    """The attention weights (B, T, S) of ``module`` for ``queries`` (B, T, D) over ``memory`` (B, S, D) under
    ``attn_mask`` (B, 1, 1, S), True where allowed: softmax(q k^T / sqrt(d_h)) averaged over the heads."""
    q = split_heads(module.q(queries), module.heads)  # (B, H, T, Dh)
    k = split_heads(module.kv(memory).chunk(2, dim=-1)[0], module.heads)  # (B, H, S, Dh)
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.size(-1))  # (B, H, T, S)
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    return scores.softmax(dim=-1).mean(dim=1)  # (B, T, S)


def last_cross_attention(model: nn.Module) -> CrossAttention | None:
    """The cross-attention module of the model's last decoder layer (the last one its decoder holds), or None."""
    decoder = getattr(model, "decoder", None)
    found = [m for m in decoder.modules() if isinstance(m, CrossAttention)] if decoder is not None else []
    return found[-1] if found else None


@contextmanager
def recorded_cross_attention(model: nn.Module) -> Iterator[list[torch.Tensor]]:
    """While open, every call of the last decoder layer's cross-attention appends its head-averaged weights
    (B, T, S) to the yielded list (nothing is recorded for a model without one)."""
    recorded: list[torch.Tensor] = []
    module = last_cross_attention(model)
    if module is None:
        yield recorded
        return

    def hook(mod: nn.Module, args: tuple[torch.Tensor, ...], _: torch.Tensor) -> None:
        queries, memory, attn_mask = args[:3]
        assert isinstance(mod, CrossAttention)
        recorded.append(head_averaged_weights(mod, queries, memory, attn_mask))

    handle = module.register_forward_hook(hook)
    try:
        yield recorded
    finally:
        handle.remove()


def forced_attention(model: nn.Module, batch: Batch) -> tuple[torch.Tensor | None, Seq2SeqOutput]:
    """The attention (B, T, S) of a teacher-forced pass over ``batch`` (with targets), and the pass's output.

    Returns None as the attention when the model shows none (no cross-attention module and no alignments).
    """
    with recorded_cross_attention(model) as recorded:
        output: Seq2SeqOutput = model(batch)
    if ALIGNMENT in output.extras:
        return output.extras[ALIGNMENT].float(), output
    return (recorded[-1] if recorded else None), output
