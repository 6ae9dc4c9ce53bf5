"""Explicit global reordering ExGRE and reordering fusion ReFSR (Chen et al. 2020; paper 000 §4.1-4.2).

ExGRE, after every encoder layer n (h_j^n its output, J the true length of each source sentence)::

    b_j^n    = J · sigmoid(v^n · tanh(W^n h_j^n))                 predicted target-order position in [0, J]
    pr_j^n   = Σ_s PE(s) · exp(-(s - b_j^n)^2 / (2σ)),  s integer, |s - b_j^n| <= D,  D = 0.5, σ = D / 2
    hbar_j^n = h_j^n + pr_j^n                                     the next layer's input; hbar^N goes on

The sum runs over the integer positions s = 1..J of the sentence. The hard window keeps only those within ±D
of b (``hard_window: true``, the default: the paper's text after Eq. 6, "s is an integer within the windows
[b - D, b + D]"); the paper's Eq. 6 sums over all s = 1..J, the Gaussian making the far
ones negligible (``hard_window: false``; computed over |s - b| <= D + 4, beyond which the weights fall under
e^-20 for D = 0.5). The two differ in one way that matters: with the hard window at D = 0.5 at most one
integer lies in the window (two only at exact half-points), so pr_j is PE(round(b_j)) times a scale, and the
reordering loss, a cosine, cannot see the scale: it gives b no gradient, and W, v learn from the translation
loss alone. With the paper's full sum the neighbours' weights move with b and the loss can pull b toward r.

Reordering loss: ``mean_j (1 - cos(pr_j^N, re_j))`` with re_j = PE(r_j), r_j the target-order position of
piece j (batch field ``reorder_positions``, 1-based, 0 at EOS and padding, which the mean skips). PE is the
table the source inputs use, whose token j (0-based) gets PE(j + 1); r_j follows the same 1-based index and
J counts the source pieces without EOS, so b and r share one scale.

ReFSR runs the encoder twice with the same weights: the plain path gives H^N, the ExGRE path Hbar^N, and a
scalar gate per position fuses them: ``g = sigmoid(U_g H^N + W_g Hbar^N)``, ``H = g · Hbar^N + (1 - g) · H^N``.
No alignment is read at translation time.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ordo.data.alignment.reorder_field import FIELD
from ordo.data.batch import Batch
from ordo.errors import ConfigError
from ordo.gemm import Linear
from ordo.losses import AuxLoss
from ordo.methods.registry import Method, check_reach, register_method
from ordo.models.embeddings import SinusoidalPositions, sinusoidal_table
from ordo.models.outputs import EncoderOutput, Seq2SeqOutput
from ordo.models.slots import Slots
from ordo.models.transformer import EncoderContext

PR_NAME = "reorder_pr"  # extras key of pr^N (B, S, D)
PREDICTED_NAME = "predicted_positions"  # extras key of b^N (B, S), the last layer's predicted target order


@dataclass
class ExGREConfig:
    """Options of ``model.methods.exgre``, checked when the run's config is built."""

    section: ClassVar[str] = "model.methods.exgre"  # where errors say the options were
    weight: float = 0.6  # λ of the reordering loss (paper: 0.4 best for En-De)
    window: float = 0.5  # D > 0: the Gaussian's σ = D / 2, and the window of the hard cut
    hard_window: bool = True  # only positions within ±D of b (paper §4.1); false: all of 1..J (paper Eq. 6)

    def __post_init__(self) -> None:
        if not 0 < self.window < math.inf:
            raise ConfigError(f"{self.section}.window: expected a positive finite window, got {self.window}")
        if not 0 <= self.weight < math.inf:
            raise ConfigError(f"{self.section}.weight: expected a finite λ >= 0, got {self.weight}")


@dataclass
class RefSRConfig(ExGREConfig):
    """Options of ``model.methods.refsr``: ExGRE's, which its reordered path uses."""

    section: ClassVar[str] = "model.methods.refsr"


class GaussianPositions(nn.Module):
    """b = J · sigmoid(v · tanh(W h)) and pr = Σ_s PE(s) exp(-(s - b)² / (2σ)) over s in 1..J, with
    |s - b| <= D when ``hard_window`` (paper 000, Eq. 5-6 and §4.1)."""

    def __init__(self, dim: int, table: SinusoidalPositions, window: float, hard_window: bool = True) -> None:
        super().__init__()
        self.w = Linear(dim, dim, bias=False)
        self.v = Linear(dim, 1, bias=False)
        self.table = table
        self.window = window
        self.sigma = window / 2
        self.hard_window = hard_window

    def predicted_positions(self, states: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """b (B, S) in [0, J] from states (B, S, D) and true lengths J (B,)."""
        return lengths.unsqueeze(1).to(states.dtype) * torch.sigmoid(self.v(torch.tanh(self.w(states)))).squeeze(-1)

    def encodings(self, positions: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """pr (B, S, D) for real-valued positions b (B, S) in sentences of J = ``lengths`` (B,) positions."""
        reach = math.ceil(self.window) + (0 if self.hard_window else 4)
        offsets = torch.arange(-reach, reach + 1, device=positions.device)  # (K,)
        candidates = torch.round(positions).long().unsqueeze(-1) + offsets  # (B, S, K)
        inside = (candidates >= 1) & (candidates <= lengths.view(-1, 1, 1))  # s in 1..J
        distance = candidates.to(positions.dtype) - positions.unsqueeze(-1)  # (B, S, K)
        weights = torch.exp(-distance.pow(2) / (2 * self.sigma)) * inside
        if self.hard_window:
            weights = weights * (distance.abs() <= self.window)
        table = self.table(candidates.clamp(0, self.table.max_positions)).to(positions.dtype)  # (B, S, K, D)
        return torch.einsum("bsk,bskd->bsd", weights, table)

    def forward(self, states: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """pr^n (B, S, D) of layer outputs h^n (B, S, D)."""
        return self.encodings(self.predicted_positions(states, lengths), lengths)


class ExplicitReorderingLayer(nn.Module):
    """An encoder layer followed by ExGRE: returns h^n + pr^n and leaves pr^n and b^n in ``ctx.extras``."""

    def __init__(self, layer: nn.Module, reorder: GaussianPositions) -> None:
        super().__init__()
        self.layer = layer
        self.reorder = reorder
        self.active = True

    def forward(self, x: torch.Tensor, ctx: EncoderContext) -> torch.Tensor:
        """(B, S, D) -> (B, S, D); the plain layer while ``active`` is False (ReFSR's plain path)."""
        states = self.layer(x, ctx)
        if not self.active:
            return states
        lengths = ctx.batch.src_lengths.to(states.device) - 1  # pieces without EOS
        positions = self.reorder.predicted_positions(states, lengths)  # (B, S)
        pr = self.reorder.encodings(positions, lengths)
        ctx.extras[PR_NAME] = pr
        ctx.extras[PREDICTED_NAME] = positions
        return states + pr


class FusionGate(nn.Module):
    """H = g · Hbar + (1 - g) · H_plain with the scalar g = sigmoid(U_g H_plain + W_g Hbar) (paper 000,
    Eq. 10-11)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.u_g = Linear(dim, 1)
        self.w_g = Linear(dim, 1, bias=False)

    def forward(self, plain: torch.Tensor, reordered: torch.Tensor) -> torch.Tensor:
        """(B, S, D) H^N and Hbar^N -> (B, S, D) fused states."""
        gate = torch.sigmoid(self.u_g(plain) + self.w_g(reordered))  # (B, S, 1)
        return gate * reordered + (1.0 - gate) * plain


class ReorderingFusionEncoder(nn.Module):
    """ReFSR: the same encoder run without and with ExGRE, fused per position (paper 000 §4.2)."""

    def __init__(self, encoder: nn.Module, dim: int) -> None:
        super().__init__()
        self.inner = encoder
        self.fusion = FusionGate(dim)

    @contextmanager
    def plain_path(self) -> Iterator[None]:
        """Switch every ExGRE layer off for one pass (the weights stay shared)."""
        layers = [m for m in self.inner.modules() if isinstance(m, ExplicitReorderingLayer)]
        for layer in layers:
            layer.active = False
        try:
            yield
        finally:
            for layer in layers:
                layer.active = True

    def forward(self, batch: Batch) -> EncoderOutput:
        """Fused states; ``extras`` keeps the ExGRE path's pr^N for the reordering loss."""
        with self.plain_path():
            plain = self.inner(batch)
        reordered = self.inner(batch)
        return EncoderOutput(self.fusion(plain.states, reordered.states), reordered.pad_mask, reordered.extras)


class ReorderingLoss:
    """mean_j (1 - cos(pr_j^N, re_j)), re_j = PE(r_j), over the real source pieces (paper 000, Eq. 9)."""

    def __init__(self) -> None:
        self.table = sinusoidal_table(1, 1)

    def target_encodings(self, positions: torch.Tensor, dim: int) -> torch.Tensor:
        """re = PE(r) (B, S, D) for 1-based positions (B, S), from a table grown on demand."""
        needed = int(positions.max()) + 1
        if self.table.size(0) < needed or self.table.size(1) != dim:
            self.table = sinusoidal_table(max(needed, 256), dim)
        return self.table.to(positions.device)[positions]

    def __call__(self, output: Seq2SeqOutput, batch: Batch) -> torch.Tensor:
        """The loss of one batch, a scalar."""
        pr = output.extras[PR_NAME].float()  # (B, S, D)
        positions = batch.fields[FIELD].to(pr.device)  # (B, S), 0 at EOS and padding
        cosine = F.cosine_similarity(pr, self.target_encodings(positions, pr.size(-1)), dim=-1)  # (B, S)
        return (1.0 - cosine).masked_select(positions > 0).mean()


def _claim_reordering_layers(slots: Slots, cfg: ExGREConfig, name: str) -> None:
    if slots.cfg.family != "transformer":
        raise ConfigError(f"model.methods.{name}: implemented for the Transformer family only")
    check_reach(slots, f"model.methods.{name}.window", cfg.window)
    dim = slots.cfg.d_model
    table = SinusoidalPositions(slots.cfg.max_positions, dim)
    slots.claim(
        "encoder_layer", name,
        lambda i: ExplicitReorderingLayer(
            slots.default_encoder_layer(i), GaussianPositions(dim, table, cfg.window, cfg.hard_window)
        ),
    )


def apply_exgre(slots: Slots, cfg: ExGREConfig) -> None:
    """ExGRE after every encoder layer (paper 000, Eq. 8)."""
    _claim_reordering_layers(slots, cfg, "exgre")


def apply_refsr(slots: Slots, cfg: RefSRConfig) -> None:
    """ExGRE layers, and the encoder run twice and fused (paper 000, Eq. 10-11)."""
    _claim_reordering_layers(slots, cfg, "refsr")
    slots.claim("encoder_wrapper", "refsr", lambda encoder: ReorderingFusionEncoder(encoder, slots.cfg.d_model))


def reordering_losses(cfg: ExGREConfig) -> list[AuxLoss]:
    """The reordering loss, logged as ``reorder_cos`` and weighted by λ."""
    return [AuxLoss("reorder_cos", cfg.weight, ReorderingLoss())]


register_method(Method("exgre", ExGREConfig, apply_exgre, reordering_losses, fields=(FIELD,)))
register_method(Method("refsr", RefSRConfig, apply_refsr, reordering_losses, fields=(FIELD,)))
