"""Relative position representations (Shaw et al. 2018), a comparison system of papers 000 and 001.

Self-attention gets key and value embeddings of the clipped relative distance (Shaw et al. Eq. 3-4)::

    e_ab = q_a · (k_b + a^K_{r(a,b)}) / sqrt(d_k),   o_a = Σ_b α_ab (v_b + a^V_{r(a,b)}),
    r(a, b) = clip(b - a, -k, k) + k                 2k + 1 relation ids, one table per layer shared by heads

in every encoder layer and, with ``decoder: true``, every decoder self-attention layer, through
:class:`RelativeSelfAttention`, the baseline's :class:`ordo.models.attention.RelationSelfAttention` with these
ids: in the encoder those of the source positions, made once per batch in the encoder's context; in the
decoder those of the new steps against every step so far, which the layer's cache counts. The absolute
sinusoidal encodings stay: Shaw et al. found that combining both neither helped nor hurt, and it keeps every
other part equal to the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ordo.data.batch import Batch
from ordo.errors import ConfigError
from ordo.methods.registry import Method, check_reach, register_method
from ordo.models.attention import BatchContext, RelationSelfAttention
from ordo.models.slots import Slots


@dataclass
class RelativePEConfig:
    """Options of ``model.methods.relative_pe``, checked when the run's config is built."""

    clip: int = 16  # k >= 1: distances beyond ±k share one embedding
    decoder: bool = True  # also in the decoder's masked self-attention

    def __post_init__(self) -> None:
        if self.clip < 1:
            raise ConfigError(f"model.methods.relative_pe.clip: expected a positive distance, got {self.clip}")


def relative_ids(query_positions: torch.Tensor, key_positions: torch.Tensor, clip: int) -> torch.Tensor:
    """r(a, b) = clip(b - a, -k, k) + k for every query a and key b: (Tq,), (Tk,) -> (1, Tq, Tk) in [0, 2k]."""
    distance = key_positions[None, :] - query_positions[:, None]  # (Tq, Tk)
    return (distance.clamp(-clip, clip) + clip).unsqueeze(0)


@dataclass(frozen=True)
class SourceRelativeIds:
    """Relative distances between all source positions of a batch; equal ones (one ``clip``) make one set of
    ids per batch for all encoder layers."""

    clip: int

    def __call__(self, batch: Batch) -> torch.Tensor:
        """(1, S, S) relation ids for ``batch.src_tokens`` (B, S)."""
        positions = torch.arange(batch.src_tokens.size(1), device=batch.src_tokens.device)
        return relative_ids(positions, positions, self.clip)


class RelativeSelfAttention(RelationSelfAttention):
    """Relation attention over the 2k + 1 clipped relative distances, in the encoder or the decoder."""

    def __init__(self, dim: int, heads: int, clip: int, dropout: float = 0.0) -> None:
        super().__init__(dim, heads, 2 * clip + 1, SourceRelativeIds(clip), dropout)
        self.clip = clip

    def relation_ids(self, q: torch.Tensor, k: torch.Tensor, context: BatchContext | None) -> torch.Tensor:
        """(1, T_query, T_key): in the encoder (``context`` given) the source positions' ids, made once per
        batch; in the decoder the distances of the new steps, the last T_query of the T_key steps in the cache,
        to every step so far."""
        if context is not None:
            return super().relation_ids(q, k, context)
        steps = torch.arange(k.size(2), device=k.device)
        return relative_ids(steps[k.size(2) - q.size(2) :], steps, self.clip)


def apply_relative_pe(slots: Slots, cfg: RelativePEConfig) -> None:
    """Relation-aware self-attention with clipped relative distances in the encoder (and decoder)."""
    check_reach(slots, "model.methods.relative_pe.clip", cfg.clip)
    model_cfg = slots.cfg
    plain_attention = slots.self_attention

    def attention(side: str, index: int) -> nn.Module:
        if side == "encoder" or cfg.decoder:
            return RelativeSelfAttention(model_cfg.d_model, model_cfg.heads, cfg.clip, model_cfg.attention_dropout)
        return plain_attention(side, index)

    slots.claim("self_attention", "relative_pe", attention)


register_method(Method("relative_pe", RelativePEConfig, apply_relative_pe))
