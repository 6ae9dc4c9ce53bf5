"""Relative position representations (Shaw et al. 2018), a comparison system of papers 000 and 001 (SPEC §0).

Self-attention gets key and value embeddings of the clipped relative distance (Shaw et al. Eq. 3-4)::

    e_ab = q_a · (k_b + a^K_{r(a,b)}) / sqrt(d_k),   o_a = Σ_b α_ab (v_b + a^V_{r(a,b)}),
    r(a, b) = clip(b - a, -k, k) + k                 2k + 1 relation ids, one table per layer shared by heads

in every encoder layer and, with ``decoder: true``, every decoder self-attention layer, through the
baseline's :class:`ordo.models.attention.RelationSelfAttention`. The absolute sinusoidal encodings stay:
Shaw et al. found that combining both neither helped nor hurt, and it keeps every other part equal to the
baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ordo.data.batch import Batch
from ordo.errors import ConfigError
from ordo.methods.registry import Method, register_method
from ordo.models.attention import RelationSelfAttention
from ordo.models.slots import Slots
from ordo.models.transformer import TransformerDecoderLayer


@dataclass
class RelativePEConfig:
    """Options of ``model.methods.relative_pe``."""

    clip: int = 16  # k: distances beyond ±k share one embedding
    decoder: bool = True  # also in the decoder's masked self-attention


def relative_ids(query_positions: torch.Tensor, key_positions: torch.Tensor, clip: int) -> torch.Tensor:
    """r(a, b) = clip(b - a, -k, k) + k for every query a and key b: (Tq,), (Tk,) -> (1, Tq, Tk) in [0, 2k]."""
    distance = key_positions[None, :] - query_positions[:, None]  # (Tq, Tk)
    return (distance.clamp(-clip, clip) + clip).unsqueeze(0)


class SourceRelativeIds(nn.Module):
    """The relations slot of the encoder: relative distances between all source positions of a batch."""

    def __init__(self, clip: int) -> None:
        super().__init__()
        self.clip = clip

    def forward(self, batch: Batch) -> torch.Tensor:
        """(1, S, S) relation ids for ``batch.src_tokens`` (B, S)."""
        positions = torch.arange(batch.src_tokens.size(1), device=batch.src_tokens.device)
        return relative_ids(positions, positions, self.clip)


class RelativeDecoderLayer(TransformerDecoderLayer):
    """A decoder layer whose masked self-attention sees relative distances; the new steps follow the cache."""

    def __init__(self, clip: int, **parts: object) -> None:
        super().__init__(**parts)  # type: ignore[arg-type]
        self.clip = clip

    def self_relations(self, x: torch.Tensor, cache: dict[str, torch.Tensor] | None) -> torch.Tensor:
        """Clipped distances (1, T, start + T) of the new steps ``x`` to every step so far."""
        start = cache["self_k"].size(2) if cache is not None and "self_k" in cache else 0
        keys = torch.arange(start + x.size(1), device=x.device)
        return relative_ids(keys[start:], keys, self.clip)


def apply_relative_pe(slots: Slots, cfg: RelativePEConfig) -> None:
    """Relation-aware self-attention with clipped relative distances in the encoder (and decoder)."""
    if cfg.clip < 1:
        raise ConfigError(f"model.methods.relative_pe.clip: expected a positive distance, got {cfg.clip}")
    model_cfg = slots.cfg
    plain_attention = slots.self_attention

    def attention(side: str, index: int) -> nn.Module:
        if side == "encoder" or cfg.decoder:
            return RelationSelfAttention(model_cfg.d_model, model_cfg.heads, 2 * cfg.clip + 1, model_cfg.attention_dropout)
        return plain_attention(side, index)

    slots.claim("self_attention", "relative_pe", attention)
    slots.claim("relations", "relative_pe", lambda: SourceRelativeIds(cfg.clip))
    if cfg.decoder:
        slots.claim("decoder_layer", "relative_pe", lambda i: RelativeDecoderLayer(cfg.clip, **slots.decoder_layer_parts(i)))


register_method(Method("relative_pe", RelativePEConfig, apply_relative_pe))
