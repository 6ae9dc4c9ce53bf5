"""Named outputs of encoders and models, and the decoder state that search reorders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import nn

from ordo.data.batch import Batch


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
        auxiliary losses, e.g. ``reorder_pr`` (B, S, D) or ``future_hidden`` (B, T, D); heads: an output
        layer of its own for an extra, by the extra's name (default: ``project``).
    """

    hidden: torch.Tensor
    project: nn.Module
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    heads: dict[str, nn.Module] = field(default_factory=dict)

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

    The source side (the encoder output, and cache or field entries whose key starts with ``src_``, e.g. the
    cross-attention keys and values) depends on the sentence alone. A model whose decoder reads it through
    row groups sets ``shares_source``: decoder rows ``i * rows_per_source`` to ``(i + 1) * rows_per_source - 1``
    then all read source row ``i``, and beam search's hypotheses share one copy of their sentence's source
    side instead of one each. Otherwise every decoder row has its own copy (``rows_per_source`` stays 1).
    """

    encoder: EncoderOutput
    step: int = 0
    caches: list[dict[str, torch.Tensor]] = field(default_factory=list)
    fields: dict[str, torch.Tensor] = field(default_factory=dict)
    shares_source: bool = False
    rows_per_source: int = 1

    def repeat_rows(self, times: int) -> None:
        """Repeat every decoder row ``times`` times in place, copies next to each other (the start of beam
        search: one row per hypothesis). The source side is repeated too unless the model ``shares_source``."""
        index = torch.arange(self.batch_size, device=self.encoder.states.device).repeat_interleave(times)
        if not self.shares_source:
            self.reorder(index)
            return
        self.caches = [_reordered(cache, index, None) for cache in self.caches]
        self.fields = _reordered(self.fields, index, None)
        self.rows_per_source *= times

    def reorder(self, index: torch.Tensor, same_sources: bool = False) -> None:
        """Keep rows ``index`` (B',) of every tensor, in that order: beam reordering and pruning.

        With ``same_sources`` the caller promises that row i of the result comes from a row of the same
        sentence as row i before (beam search reordering hypotheses within each sentence), so the source side
        is left as it is. With ``rows_per_source`` > 1, each group of that many consecutive entries of
        ``index`` must come from one sentence.

        Raises:
            ValueError: if a group of ``index`` mixes sentences.
        """
        source_index = None if same_sources else self._source_rows(index)
        if source_index is not None:
            self.encoder = self.encoder.index_select(source_index)
        self.caches = [_reordered(cache, index, source_index) for cache in self.caches]
        self.fields = _reordered(self.fields, index, source_index)

    def _source_rows(self, index: torch.Tensor) -> torch.Tensor:
        """The source row of each group of ``rows_per_source`` entries of ``index`` (decoder rows)."""
        group = self.rows_per_source
        if group == 1:
            return index
        if index.numel() % group:
            raise ValueError(f"{index.numel()} rows do not make groups of {group} rows per source sentence")
        sources = index.view(-1, group).div(group, rounding_mode="floor")  # (B', group)
        if not bool(sources.eq(sources[:, :1]).all()):
            raise ValueError(f"each group of {group} rows must come from one source sentence")
        return sources[:, 0]

    @property
    def batch_size(self) -> int:
        """Number of rows (sentences times beams) the state holds."""
        return self.encoder.states.size(0) * self.rows_per_source


def _reordered(
    tensors: dict[str, torch.Tensor], index: torch.Tensor, source_index: torch.Tensor | None
) -> dict[str, torch.Tensor]:
    """``tensors`` with rows ``index``, and ``src_*`` entries with rows ``source_index`` (None: as they are)."""
    reordered = {}
    for key, tensor in tensors.items():
        rows = source_index if key.startswith("src_") else index
        reordered[key] = tensor if rows is None else tensor.index_select(0, rows)
    return reordered


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
