"""Future cost (Chen et al. 2020; paper 004 §4): Model I and Model II.

The paper's equations 8-12 are images; its parameter list (W_r, U_r, W_z, U_z, W, U) and text make them
(docs/methods.md, "Future cost") a GRU cell whose input is the current target word and whose state is
the decoder's top layer::

    r_i  = σ(W_r E[y_i] + U_r H_i);   z_i = σ(W_z E[y_i] + U_z H_i)
    F~_i = tanh(W E[y_i] + U (r_i ⊙ H_i));   F_i = (1 - z_i) ⊙ H_i + z_i ⊙ F~_i
    P^(y_{i+1}) = softmax(W_o F_i)                     W_o: the output projection shared with the main softmax

H_i is the top decoder state that predicts y_i; F_0 = GRU(E[</s>], mean of the encoder outputs over the true
source length). Model I adds ``λ · CE(P^(y_{i+1}))`` to the loss and translates as usual. Model II also fuses
F_i into the next step: ``g = σ(W_g [F_i ; H_{i+1}])``, ``H'_{i+1} = g · F_i + (1 - g) · H_{i+1}`` feeds the
main softmax.

Indexing in code (0-based ``t``): ``hidden[:, t]`` is H_{t+1}, which predicts ``tgt_out[:, t]`` = y_{t+1};
``future[:, t]`` is F_t, computed from H_t (the previous position's state, or the encoder mean for t = 0)
and E[y_t] (``tgt_in[:, t]``, with </s> for t = 0), and it predicts y_{t+1} = ``tgt_out[:, t]`` too, so the
future-cost loss reads the same targets as the main loss, shifted by one against the state it comes from.
Training computes F for all positions at once. Beam search keeps H_t (the previous step's top state) in the
decoder state as ``future_prev_hidden`` and computes F_t from the hypothesis' own word y_t when it arrives,
so reordering the beam reorders F's inputs with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Literal

import torch
from torch import nn

from ordo.choices import check_choices
from ordo.data.batch import EOS_ID, PAD_ID, Batch
from ordo.errors import ConfigError
from ordo.gemm import Linear
from ordo.losses import AuxLoss, output_nll
from ordo.methods.registry import Method, register_method
from ordo.models.outputs import DecoderState, EncoderOutput, Seq2SeqOutput
from ordo.models.slots import Slots
from ordo.models.transformer import TransformerDecoder, TransformerModel


@dataclass
class FutureCostConfig:
    """Options of ``model.methods.future_cost``, checked when the run's config is built."""

    model: Literal[1, 2] = 2  # 1: future-cost loss only (Model I); 2: the loss and the gated fusion (Model II)
    weight: float = 0.7  # λ of the future-cost loss (paper: 0.7 for En-De, 0.3-0.5 for Zh-En)
    # share of the target positions whose future-cost loss is computed at each update (1: all, the paper's;
    # below 1: a random subset, which estimates the same mean at that share of the second projection's cost)
    sample_fraction: float = 1.0
    # Ablations beside the paper's form (issue 25's defect check), all off by default:
    detach_state: bool = False  # F reads a stopped copy of H (and of the encoder mean): no gradient into H
    own_output: bool = False  # the future-cost softmax gets its own (V x D) projection instead of the shared W_o
    gate_bias: float | None = None  # Model II: a learnt gate bias started at this value (-3: g ≈ 0.05, nearly
    # closed); None: g = σ(W_g [F ; H]) without a bias, as the paper

    def __post_init__(self) -> None:
        check_choices(self, "model.methods.future_cost")
        if not 0 <= self.weight < math.inf:
            raise ConfigError(f"model.methods.future_cost.weight: expected a finite λ >= 0, got {self.weight}")
        if not 0.0 < self.sample_fraction <= 1.0:
            raise ConfigError(f"model.methods.future_cost.sample_fraction: expected a share in (0, 1], got "
                              f"{self.sample_fraction}")
        if self.gate_bias is not None and self.model != 2:
            raise ConfigError("model.methods.future_cost.gate_bias: Model II's gate option (model: 2)")


class FutureContextCell(nn.Module):
    """F = (1 - z) ⊙ H + z ⊙ tanh(W E + U (r ⊙ H)), r, z = σ(W_{r,z} E + U_{r,z} H) (paper 004, Eq. 8-11)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.input_maps = Linear(dim, 3 * dim)  # W_r, W_z, W stacked, with biases
        self.gate_maps = Linear(dim, 2 * dim, bias=False)  # U_r, U_z stacked
        self.candidate_map = Linear(dim, dim, bias=False)  # U

    def forward(self, word: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """F from word embeddings E[y] and top decoder states H, both (..., D); returns (..., D)."""
        from_word_r, from_word_z, from_word = self.input_maps(word).chunk(3, dim=-1)
        from_state_r, from_state_z = self.gate_maps(state).chunk(2, dim=-1)
        reset = torch.sigmoid(from_word_r + from_state_r)
        update = torch.sigmoid(from_word_z + from_state_z)
        candidate = torch.tanh(from_word + self.candidate_map(reset * state))
        return (1.0 - update) * state + update * candidate


class FutureGate(nn.Module):
    """H' = g · F + (1 - g) · H with g = σ(W_g [F ; H]), W_g in R^{2d x 1} (paper 004 §4.2, Model II); with
    ``bias`` b, g = σ(W_g [F ; H] + b), b learnt from that start value (an ablation: a gate started closed)."""

    def __init__(self, dim: int, bias: float | None = None) -> None:
        super().__init__()
        self.w_g = Linear(2 * dim, 1, bias=False)
        self.bias = None if bias is None else nn.Parameter(torch.tensor(float(bias)))

    def forward(self, future: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """(..., D) F_i and H_{i+1} -> (..., D) H'_{i+1}."""
        logit = self.w_g(torch.cat([future, hidden], dim=-1))  # (..., 1)
        gate = torch.sigmoid(logit if self.bias is None else logit + self.bias)
        return gate * future + (1.0 - gate) * hidden


def mean_source_state(encoder_out: EncoderOutput) -> torch.Tensor:
    """Mean of the encoder states over each sentence's true length: (B, S, D) -> (B, D)."""
    keep = (~encoder_out.pad_mask).unsqueeze(-1).to(encoder_out.states.dtype)  # (B, S, 1)
    return (encoder_out.states * keep).sum(1) / keep.sum(1).clamp(min=1.0)


class FutureCostModel(TransformerModel):
    """The baseline Transformer with the future-context cell (Model I) and the fusion gate (Model II)."""

    def __init__(self, encoder: nn.Module, decoder: TransformerDecoder, output: nn.Module,
                 cfg: FutureCostConfig) -> None:
        super().__init__(encoder, decoder, output)
        dim = decoder.embed.embedding_dim
        self.variant = cfg.model
        self.detach_state = cfg.detach_state
        self.future_cell = FutureContextCell(dim)
        self.gate = FutureGate(dim, cfg.gate_bias) if cfg.model == 2 else None
        weight: torch.Tensor = output.weight  # type: ignore[assignment]
        vocab = weight.size(0)
        self.future_output = Linear(dim, vocab, bias=False) if cfg.own_output else None

    def future_states(self, tgt_in: torch.Tensor, hidden: torch.Tensor, encoder_out: EncoderOutput) -> torch.Tensor:
        """F_0..F_{T-1} for all positions at once: (B, T) ``tgt_in``, (B, T, D) ``hidden`` -> (B, T, D)."""
        words = tgt_in.clone()
        words[:, 0] = EOS_ID  # F_0 reads E[</s>]
        previous = torch.cat([mean_source_state(encoder_out).unsqueeze(1), hidden[:, :-1]], dim=1)  # H_0..H_{T-1}
        if self.detach_state:
            previous = previous.detach()
        return self.future_cell(self.decoder.embed(words), previous)

    def teacher_forced_output(
        self, tgt_in: torch.Tensor, hidden: torch.Tensor, encoder_out: EncoderOutput
    ) -> Seq2SeqOutput:
        """The states the main softmax reads (H, or H' for Model II) and ``future_hidden`` F_t, both (B, T, D),
        with the shared output layer W_o."""
        future = self.future_states(tgt_in, hidden, encoder_out)  # (B, T, D)
        top = hidden if self.gate is None else self.gate(future, hidden)
        extras = dict(encoder_out.extras)
        extras["future_hidden"] = future
        heads: dict[str, nn.Module] = {} if self.future_output is None else {"future_hidden": self.future_output}
        return Seq2SeqOutput(top, self.output, extras, heads)

    def init_state(self, encoder_out: EncoderOutput) -> DecoderState:
        """Baseline caches; Model II also keeps H_0 = mean encoder state as ``future_prev_hidden``."""
        state = super().init_state(encoder_out)
        if self.gate is not None:
            state.fields["future_prev_hidden"] = mean_source_state(encoder_out)
        return state

    def step_logits(self, prev_tokens: torch.Tensor, hidden: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Model I: the baseline's. Model II: F_t from the hypothesis' word y_t and H_t, fused into H_{t+1} =
        ``hidden`` (B, D)."""
        if self.gate is None:
            return super().step_logits(prev_tokens, hidden, state)
        words = prev_tokens if state.step > 0 else torch.full_like(prev_tokens, EOS_ID)
        future = self.future_cell(self.decoder.embed(words), state.fields["future_prev_hidden"])  # (B, D)
        state.fields["future_prev_hidden"] = hidden
        return self.output(self.gate(future, hidden))


def future_cost_loss(output: Seq2SeqOutput, batch: Batch, sample_fraction: float = 1.0) -> torch.Tensor:
    """Mean cross-entropy of P^(y_{t+1}) = softmax(W_o F_t) against y_{t+1} (paper 004, Eq. 12-13).

    With ``sample_fraction`` p < 1, while gradients are computed, each non-pad position is kept with probability
    p (drawn anew at every call) and only the kept ones go through the V-way output projection; their NLL sum
    divided by p·N (N: the non-pad positions) is an unbiased estimate of the mean (Horvitz-Thompson). Without
    gradients (evaluating a trained model) the mean is exact.
    """
    assert batch.tgt_out is not None
    positions = batch.tgt_out.ne(PAD_ID).sum().clamp(min=1)
    targets, share = batch.tgt_out, 1.0
    if sample_fraction < 1.0 and torch.is_grad_enabled():
        left_out = torch.rand(targets.shape, device=targets.device) >= sample_fraction
        targets, share = targets.masked_fill(left_out, PAD_ID), sample_fraction
    # ε = 0: the (differentiable) loss sum is the NLL sum; output_nll's second value is for logging only
    project = output.heads.get("future_hidden", output.project)  # W_o, or the ablation's own projection
    nll_sum = output_nll(output.extras["future_hidden"], project, targets, epsilon=0.0)[0]
    return nll_sum / (share * positions)


def apply_future_cost(slots: Slots, cfg: FutureCostConfig) -> None:
    """Replace the model class with :class:`FutureCostModel` (Transformer family only)."""
    if slots.cfg.family != "transformer":
        raise ConfigError("model.methods.future_cost: implemented for the Transformer family only")
    slots.claim("model_class", "future_cost", lambda enc, dec, out: FutureCostModel(enc, dec, out, cfg))


def future_cost_losses(cfg: FutureCostConfig) -> list[AuxLoss]:
    """The future-cost loss, logged as ``future_cost`` and weighted by λ."""
    return [AuxLoss("future_cost", cfg.weight, partial(future_cost_loss, sample_fraction=cfg.sample_fraction))]


register_method(Method("future_cost", FutureCostConfig, apply_future_cost, future_cost_losses))
