"""Distortion models for the attention of RNNsearch* (Zhang et al., ACL 2017; paper 003, Eq. 7-13).

The attention of step t mixes a distortion term into the content-based alignment α^_t::

    α_t = λ · d_t + (1 - λ) · α^_t,     d_t = Σ_{k=-l..l} P(k | Ψ) · Γ(α_{t-1}, k)
    P(· | Ψ) = softmax(W Ψ + b) over the 2l + 1 jumps          α_0 = one-hot on the first source word

Γ(α, k) shifts an alignment vector k positions to the right (k < 0: left) with zero fill (Eq. 9); it is a
pad-and-unfold over all 2l + 1 shifts at once. Ψ is the context of the distortion: ``source`` (S-Distortion)
the previous source context c_{t-1}, ``target`` (T-Distortion) the previous word's embedding E[y_{t-1}],
``hidden`` (H-Distortion) the previous decoder state s_{t-1}.

Where the paper leaves it open: mass that Γ shifts past either edge of the sentence or onto padding is
dropped, and d_t is renormalized over the true source length (k = 0 always keeps some mass there), so α_t is
a distribution over the real source words. The previous alignment α_{t-1} and, for S-Distortion, c_{t-1} live
in the decoder state, which beam search reorders with the hypotheses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from ordo.choices import check_choices
from ordo.errors import ConfigError
from ordo.gemm import Linear
from ordo.methods.registry import Method, check_reach, register_method
from ordo.models.outputs import DecoderState, EncoderOutput
from ordo.models.rnn import MLPAttention
from ordo.models.slots import Slots

Context = Literal["source", "target", "hidden"]


@dataclass
class DistortionConfig:
    """Options of ``model.methods.distortion``, checked when the run's config is built."""

    context: Context = "hidden"  # S-, T- or H-Distortion: Ψ is c_{t-1}, E[y_{t-1}] or s_{t-1}
    window: int = 3  # l >= 1: jumps of -l..l source positions
    weight: float = 0.5  # λ in [0, 1]: share of the distortion term in the alignment

    def __post_init__(self) -> None:
        check_choices(self, "model.methods.distortion")
        if self.window < 1:
            raise ConfigError(f"model.methods.distortion.window: expected l >= 1, got {self.window}")
        if not 0.0 <= self.weight <= 1.0:
            raise ConfigError(f"model.methods.distortion.weight: expected λ in [0, 1], got {self.weight}")


def shift_alignments(alignment: torch.Tensor, window: int) -> torch.Tensor:
    """Γ(α, k) for k = -l..l: (B, S) -> (B, 2l + 1, S), row k + l holding α shifted by k with zero fill."""
    length = alignment.size(-1)
    padded = F.pad(alignment, (window, window))  # (B, S + 2l)
    windows = padded.unfold(-1, length, 1)  # (B, 2l + 1, S): window i holds α_{j + i - l}, the shift k = l - i
    return windows.flip(1)


class DistortionAttention(MLPAttention):
    """MLP attention whose alignment is mixed with a distortion of the previous one (paper 003, Eq. 7-9)."""

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int, context: Context, context_dim: int, window: int,
                 weight: float) -> None:
        super().__init__(query_dim, key_dim, attn_dim)
        self.context = context
        self.window = window
        self.weight = weight
        self.jump = Linear(context_dim, 2 * window + 1)  # W, b of P(k | Ψ)

    def init_state(self, encoder_out: EncoderOutput, state: DecoderState) -> None:
        """Keys, α_0 (one-hot on the first source word) and, for S-Distortion, c_0 = 0."""
        super().init_state(encoder_out, state)
        states = encoder_out.states
        first = torch.zeros(states.shape[:2], dtype=states.dtype, device=states.device)  # (B, S)
        first[:, 0] = 1.0
        state.fields["prev_alignment"] = first
        if self.context == "source":
            state.fields["prev_context"] = torch.zeros_like(states[:, 0])  # (B, C)

    def jump_probabilities(self, state: DecoderState, prev_embedding: torch.Tensor | None) -> torch.Tensor:
        """P(k | Ψ) (B, 2l + 1) for the configured context Ψ."""
        if self.context == "source":
            psi = state.fields["prev_context"]
        elif self.context == "target":
            assert prev_embedding is not None
            psi = prev_embedding
        else:
            psi = state.fields["hidden"]
        return self.jump(psi).softmax(dim=-1)

    def distortion(self, jumps: torch.Tensor, previous: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
        """d_t (B, S) = Σ_k P(k) Γ(α_{t-1}, k), zero on padding, renormalized over the true length."""
        shifted = shift_alignments(previous, self.window)  # (B, 2l + 1, S)
        mixed = torch.einsum("bk,bks->bs", jumps, shifted).masked_fill(pad_mask, 0.0)
        return mixed / mixed.sum(-1, keepdim=True).clamp(min=1e-12)

    def forward(self, query: torch.Tensor, state: DecoderState, prev_embedding: torch.Tensor | None = None) -> torch.Tensor:
        """α_t (B, S) = λ d_t + (1 - λ) α^_t; stores α_t (and c_t for S-Distortion) for the next step."""
        content = super().forward(query, state)  # α^_t
        jumps = self.jump_probabilities(state, prev_embedding)
        alignment = self.weight * self.distortion(jumps, state.fields["prev_alignment"], state.encoder.pad_mask)
        alignment = alignment + (1.0 - self.weight) * content
        state.fields["prev_alignment"] = alignment
        if self.context == "source":
            state.fields["prev_context"] = torch.bmm(alignment.unsqueeze(1), state.encoder.states).squeeze(1)
        return alignment


def apply_distortion(slots: Slots, cfg: DistortionConfig) -> None:
    """Replace RNNsearch*'s attention with :class:`DistortionAttention`."""
    if slots.cfg.family != "rnn":
        raise ConfigError("model.methods.distortion: the distortion models apply to the rnn family (RNNsearch*)")
    check_reach(slots, "model.methods.distortion.window", cfg.window)
    hidden, embed = slots.cfg.d_model, slots.cfg.embed_dim or slots.cfg.d_model
    context_dim = {"source": 2 * hidden, "target": embed, "hidden": hidden}[cfg.context]
    slots.claim(
        "rnn_attention", "distortion",
        lambda query, key, attn: DistortionAttention(query, key, attn, cfg.context, context_dim, cfg.window, cfg.weight),
    )


register_method(Method("distortion", DistortionConfig, apply_distortion))
