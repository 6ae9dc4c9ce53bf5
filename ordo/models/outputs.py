"""Named outputs of encoders and models, and the decoder state that search reorders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import nn

from ordo.batch import Batch


@dataclass
class EncoderOutput:
    """What the decoder attends to.

    Shape:
        states: (B, S, D); pad_mask: (B, S), True at padding; extras: named tensors a method adds
        (e.g. ``reorder_pr`` (B, S, D)) that losses or analyses read.
    """

    states: torch.Tensor
    pad_mask: torch.Tensor
    extras: dict[str, torch.Tensor] = field(default_factory=dict)

    def index_select(self, index: torch.Tensor) -> EncoderOutput:
        """Rows ``index`` of every tensor (beam expansion, dropping finished sentences)."""
        return EncoderOutput(
            states=self.states.index_select(0, index),
            pad_mask=self.pad_mask.index_select(0, index),
            extras={k: v.index_select(0, index) for k, v in self.extras.items()},
        )


@dataclass
class Seq2SeqOutput:
    """A teacher-forced forward pass, up to the output layer: the losses project ``hidden`` themselves, in
    chunks of rows and without the padded positions (:func:`ordo.losses.output_nll`).

    Shape:
        hidden: (B, T, D), what the output layer reads at each target position; project: the output layer,
        (…, D) -> (…, V), with a ``weight`` (V, D) and an optional ``bias``; extras: named tensors for
        auxiliary losses, e.g. ``reorder_pr`` (B, S, D) or ``future_hidden`` (B, T, D).
    """

    hidden: torch.Tensor
    project: nn.Module
    extras: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def logits(self) -> torch.Tensor:
        """The full (B, T, V) logits, for analyses and tests; training never builds them."""
        return self.project(self.hidden)  # type: ignore[no-any-return]


@dataclass
class DecoderState:
    """Everything incremental decoding carries from one step to the next.

    ``caches`` holds one dict per decoder layer (self-attention keys/values so far, cross-attention
    keys/values of the encoder states); ``fields`` holds what a method adds (future-cost state F_i,
    distortion's previous alignment). Every tensor is batch-first, so :meth:`reorder` keeps them all in
    step with the hypotheses of beam search.
    """

    encoder: EncoderOutput
    step: int = 0
    caches: list[dict[str, torch.Tensor]] = field(default_factory=list)
    fields: dict[str, torch.Tensor] = field(default_factory=dict)

    def reorder(self, index: torch.Tensor, same_sources: bool = False) -> None:
        """Keep rows ``index`` (B',) of every tensor, in that order: beam reordering and pruning.

        Entries that depend on the source sentence alone (the encoder output, and cache or field entries
        whose key starts with ``src_``, e.g. the cross-attention keys and values) are equal on all rows of a
        sentence. With ``same_sources`` the caller promises that row i of the result comes from a row of the
        same sentence as row i before (beam search reordering hypotheses within each sentence), so those
        entries are left as they are.
        """
        if not same_sources:
            self.encoder = self.encoder.index_select(index)
        self.caches = [_reordered(cache, index, same_sources) for cache in self.caches]
        self.fields = _reordered(self.fields, index, same_sources)

    @property
    def batch_size(self) -> int:
        """Number of rows (sentences times beams) the state holds."""
        return self.encoder.states.size(0)


def _reordered(tensors: dict[str, torch.Tensor], index: torch.Tensor, same_sources: bool) -> dict[str, torch.Tensor]:
    """``tensors`` with rows ``index``; ``src_*`` entries kept as they are when ``same_sources``."""
    return {k: v if same_sources and k.startswith("src_") else v.index_select(0, index) for k, v in tensors.items()}


class Seq2SeqModel(Protocol):
    """What training and search need from a model family (Transformer or attention RNN).

    ``max_output_tokens`` is the most output tokens (EOS not counted) the decoder can produce, e.g. its
    position table's size less one; None when unbounded (the RNN).
    """

    max_output_tokens: int | None

    def forward(self, batch: Batch) -> Seq2SeqOutput:
        """Teacher-forced pass over ``batch.tgt_in``."""

    def encode(self, batch: Batch) -> EncoderOutput:
        """Encode the source side."""

    def init_state(self, encoder_out: EncoderOutput) -> DecoderState:
        """A fresh decoder state for incremental decoding."""

    def decode_step(self, prev_tokens: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Logits (B, V) for the next token given ``prev_tokens`` (B,); advances ``state`` in place."""
