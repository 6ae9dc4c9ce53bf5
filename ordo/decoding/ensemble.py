"""Ensemble decoding: several trained models searched as one, each with its own encoder output and decoder state.

At every step the next-token distribution is the mean of the members' probabilities, returned as its logarithm
(``logsumexp`` of the members' log-softmax minus ``log N``, fairseq's ensemble rule). Search applies
``log_softmax`` to what :meth:`Ensemble.decode_step` returns, which leaves these normalised log-probabilities as
they are, so :mod:`ordo.decoding.search` runs an ensemble unchanged.

An ensemble has no teacher-forced pass of its own (no ``forward``, no attention to read): search steps it, and
:mod:`ordo.decoding.scoring` runs each member's pass and takes the same mean per token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ordo.data.batch import Batch
from ordo.models.outputs import DecoderState, EncoderOutput, Seq2SeqModel


@dataclass
class EnsembleEncoderOutput(EncoderOutput):
    """One encoder output per member; ``states`` and ``pad_mask`` are the first member's (their rows are the
    batch's sentences, as every member's are)."""

    members: list[EncoderOutput] = field(default_factory=list)

    def index_select(self, index: torch.Tensor) -> EnsembleEncoderOutput:
        """Rows ``index`` of every member's output."""
        return _encoder_output([member.index_select(index) for member in self.members])


def _encoder_output(members: list[EncoderOutput]) -> EnsembleEncoderOutput:
    """The ensemble's encoder output over ``members``."""
    return EnsembleEncoderOutput(states=members[0].states, pad_mask=members[0].pad_mask, members=members)


@dataclass
class EnsembleState(DecoderState):
    """One decoder state per member, moved together: :meth:`repeat_rows` and :meth:`reorder` apply to every
    member's state, so each member's caches stay in step with the hypotheses. The fields inherited from
    :class:`DecoderState` mirror the first member's state (``encoder``, ``step``); the members keep their own
    caches and fields, and their own source-sharing layout."""

    members: list[DecoderState] = field(default_factory=list)

    def repeat_rows(self, times: int) -> None:
        """Repeat every decoder row ``times`` times in every member's state."""
        for member in self.members:
            member.repeat_rows(times)
        self._mirror_first()

    def reorder(self, index: torch.Tensor, same_sources: bool = False) -> None:
        """Keep rows ``index`` (B',) of every member's state, in that order (see :meth:`DecoderState.reorder`)."""
        for member in self.members:
            member.reorder(index, same_sources)
        self._mirror_first()

    def _mirror_first(self) -> None:
        """Point the inherited fields at the first member's state."""
        first = self.members[0]
        self.encoder, self.step, self.rows_per_source = first.encoder, first.step, first.rows_per_source

    @property
    def batch_size(self) -> int:
        """Number of rows (sentences times beams), the same in every member's state."""
        return self.members[0].batch_size


class Ensemble(nn.Module):
    """Models searched as one (the ``Seq2SeqModel`` protocol's ``encode``, ``init_state`` and ``decode_step``).

    The members must read the same source rows and fields and share the target vocabulary; the caller checks
    that (:func:`ordo.api.load_ensemble`). ``max_output_tokens`` is the smallest of the members' (None only
    when every member is unbounded).

    Args:
        members: the models, at least one.

    Raises:
        ValueError: when ``members`` is empty.
    """

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one model")
        self.members = nn.ModuleList(members)
        limits = [m.max_output_tokens for m in self.models if m.max_output_tokens is not None]
        self.max_output_tokens: int | None = min(limits) if limits else None

    @property
    def models(self) -> list[Seq2SeqModel]:
        """The members, as search sees them."""
        return [cast(Seq2SeqModel, member) for member in self.members]

    def encode(self, batch: Batch) -> EnsembleEncoderOutput:
        """Every member's encoding of ``batch``."""
        return _encoder_output([member.encode(batch) for member in self.models])

    def init_state(self, encoder_out: EncoderOutput) -> EnsembleState:
        """A fresh decoder state per member, from that member's encoder output (from :meth:`encode`).

        Raises:
            TypeError: when ``encoder_out`` is not the ensemble's own.
        """
        if not isinstance(encoder_out, EnsembleEncoderOutput):
            raise TypeError("Ensemble.init_state takes the output of Ensemble.encode")
        states = [member.init_state(out) for member, out in zip(self.models, encoder_out.members)]
        ensemble = EnsembleState(states[0].encoder, members=states)
        ensemble._mirror_first()
        return ensemble

    def decode_step(self, prev_tokens: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Log of the members' mean next-token probability, (B, V) float32, given ``prev_tokens`` (B,); advances
        every member's state in place.

        Raises:
            TypeError: when ``state`` is not the ensemble's own (from :meth:`init_state`).
        """
        if not isinstance(state, EnsembleState):
            raise TypeError("Ensemble.decode_step takes the state of Ensemble.init_state")
        lprobs = torch.stack([
            F.log_softmax(member.decode_step(prev_tokens, member_state).float(), dim=-1)
            for member, member_state in zip(self.models, state.members)
        ])  # (N, B, V)
        state._mirror_first()
        return torch.logsumexp(lprobs, dim=0) - math.log(len(self.members))
