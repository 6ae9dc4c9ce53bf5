"""Reordering embeddings (Chen et al., ACL 2019; paper 001 §4) and its control, additional PE.

Per layer n, with H^{n-1} the layer input (Eq. 9 of the paper)::

    Hbar = LN(SelfAttn(H^{n-1}) + H^{n-1})
    PP   = sigmoid(V · tanh(W · H^{n-1} + Wbar · Hbar))      Eq. 6, W, Wbar, V in R^{d x d}, no biases
    C    = LN(Hbar + PE ⊙ PP)                                 Eq. 7-8
    H^n  = LN(FFN(C) + Hbar)                                  Eq. 9: the residual comes from Hbar

In the decoder (variant ``decoder`` or ``both``) the reordering step sits after masked self-attention and
before cross-attention (the paper's Figure 2); by analogy with Eq. 9 the cross-attention reads C and its
residual comes from Hbar: ``X = LN(CrossAttn(C) + Hbar); H^n = LN(FFN(X) + X)``. The paper does not write
the decoder's equations out; this is our reading, stated here. The step is position-wise, so incremental
decoding needs nothing but the step's position.

``additional_pe`` is the paper's control experiment (its §6.1): the same step with PP fixed to 1, i.e. the
original PE added again inside every encoder layer, with no new parameters.

The paper's equations are post-norm; a pre-norm model with these methods is a configuration error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from ordo.choices import check_choices
from ordo.errors import ConfigError
from ordo.gemm import Linear
from ordo.methods.registry import Method, register_method
from ordo.models.embeddings import SinusoidalPositions
from ordo.models.slots import Slots
from ordo.models.transformer import TransformerDecoderLayer, TransformerEncoderLayer


@dataclass
class ReorderEmbConfig:
    """Options of ``model.methods.reorder_emb``, checked when the run's config is built."""

    variant: Literal["encoder", "decoder", "both"] = "both"  # which stacks get reordering embeddings

    def __post_init__(self) -> None:
        check_choices(self, "model.methods.reorder_emb")


@dataclass
class AdditionalPEConfig:
    """``model.methods.additional_pe`` has no options; an empty section (``{}``) switches it on."""


class PositionalPenalty(nn.Module):
    """PP = sigmoid(V · tanh(W · H^{n-1} + Wbar · Hbar)), Eq. 6 of paper 001; every entry in (0, 1)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.w = Linear(dim, dim, bias=False)
        self.w_bar = Linear(dim, dim, bias=False)
        self.v = Linear(dim, dim, bias=False)

    def forward(self, layer_input: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """(B, T, D) H^{n-1} and (B, T, D) Hbar -> (B, T, D) penalties."""
        return torch.sigmoid(self.v(torch.tanh(self.w(layer_input) + self.w_bar(attended))))


class ReorderingStep(nn.Module):
    """C = LN(Hbar + PE ⊙ PP) (Eq. 7-8); with no penalty module PP = 1 (the additional-PE control)."""

    def __init__(self, dim: int, table: SinusoidalPositions, penalty: PositionalPenalty | None) -> None:
        super().__init__()
        self.table = table
        self.penalty = penalty
        self.norm = nn.LayerNorm(dim)

    def forward(self, layer_input: torch.Tensor, attended: torch.Tensor, start: int = 0) -> torch.Tensor:
        """C for tokens at 0-based positions start..start+T-1 (PE of 1-based positions start+1..start+T).

        Shape:
            layer_input, attended: (B, T, D) H^{n-1} and Hbar; returns (B, T, D).
        """
        pe = self.table.table[start + 1 : start + attended.size(1) + 1].unsqueeze(0)  # (1, T, D)
        if self.penalty is None:
            return self.norm(attended + pe)
        return self.norm(attended + pe * self.penalty(layer_input, attended))


class ReorderingEncoderLayer(TransformerEncoderLayer):
    """An encoder layer with the reordering step between self-attention and FFN: H^n = LN(FFN(C) + Hbar) (Eq. 9),
    the baseline layer's forward with C as the FFN's input."""

    packs_tokens = False  # the step adds PE by position in the padded (B, S) layout

    def __init__(self, reorder: ReorderingStep, **parts: object) -> None:
        super().__init__(**parts)  # type: ignore[arg-type]
        self.reorder = reorder

    def ffn_input(self, layer_input: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """C = LN(Hbar + PE ⊙ PP) (Eq. 7-8) of H^{n-1} = ``layer_input`` and Hbar = ``attended``, (B, S, D)."""
        return self.reorder(layer_input, attended)


class ReorderingDecoderLayer(TransformerDecoderLayer):
    """A decoder layer with the reordering step between masked self-attention and cross-attention: the baseline
    layer's forward with C as the cross-attention's queries and Hbar its residual."""

    def __init__(self, reorder: ReorderingStep, **parts: object) -> None:
        super().__init__(**parts)  # type: ignore[arg-type]
        self.reorder = reorder

    def cross_attention_input(
        self, layer_input: torch.Tensor, attended: torch.Tensor, cache: dict[str, torch.Tensor] | None
    ) -> torch.Tensor:
        """C (B, T, D) of the new steps, whose positions follow the steps decoded before them in ``cache``."""
        start = 0 if cache is None else cache["self_k"].size(2) - attended.size(1)
        return self.reorder(layer_input, attended, start)


def _require_post_norm(slots: Slots, method: str) -> None:
    if slots.cfg.norm != "post":
        raise ConfigError(f"model.methods.{method}: the paper's equations are post-norm; set model.norm=post")


def _step_factory(slots: Slots, learned: bool) -> Callable[[], ReorderingStep]:
    """A factory of reordering steps that share one PE table (the one the model's inputs use)."""
    dim = slots.cfg.d_model
    table = SinusoidalPositions(slots.cfg.max_positions, dim)
    return lambda: ReorderingStep(dim, table, PositionalPenalty(dim) if learned else None)


def apply_reorder_emb(slots: Slots, cfg: ReorderEmbConfig) -> None:
    """Replace the encoder and/or decoder layers with reordering layers (paper 001 §5)."""
    _require_post_norm(slots, "reorder_emb")
    new_step = _step_factory(slots, learned=True)
    if cfg.variant in ("encoder", "both"):
        slots.claim(
            "encoder_layer", "reorder_emb", lambda i: ReorderingEncoderLayer(new_step(), **slots.encoder_layer_parts(i))
        )
    if cfg.variant in ("decoder", "both"):
        slots.claim(
            "decoder_layer", "reorder_emb", lambda i: ReorderingDecoderLayer(new_step(), **slots.decoder_layer_parts(i))
        )


def apply_additional_pe(slots: Slots, cfg: AdditionalPEConfig) -> None:
    """Add the original PE again inside every encoder layer (paper 001's control experiment)."""
    _require_post_norm(slots, "additional_pe")
    new_step = _step_factory(slots, learned=False)
    slots.claim(
        "encoder_layer", "additional_pe", lambda i: ReorderingEncoderLayer(new_step(), **slots.encoder_layer_parts(i))
    )


register_method(Method("reorder_emb", ReorderEmbConfig, apply_reorder_emb))
register_method(Method("additional_pe", AdditionalPEConfig, apply_additional_pe))
