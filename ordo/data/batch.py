"""The batch every model, loss and search consumes.

Conventions, stated once for the whole package:

- Tensors are batch-first.
- ``src_pad_mask`` is True where a position is padding.
- Token ids: ``PAD_ID`` 0, ``UNK_ID`` 1, ``BOS_ID`` 2, ``EOS_ID`` 3 (SentencePiece models are trained with them).
- A source row is ``pieces + [EOS]``; ``tgt_in`` is ``[BOS] + pieces`` and ``tgt_out`` is ``pieces + [EOS]``.
- Positions are 1-based: the token at index j has position j + 1 (docs/methods.md, notation).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3


@dataclass
class Batch:
    """A padded batch of sentence pairs.

    Shape:
        src_tokens: (B, S); src_lengths: (B,) including EOS; tgt_in, tgt_out: (B, T) or None at
        translation time; fields: per-method extra tensors keyed by name, e.g. ``reorder_positions``
        (B, S) or ``lattice_relations`` (B, S, S); ids: (B,) index of each pair in its split.
    """

    src_tokens: torch.Tensor
    src_lengths: torch.Tensor
    ids: torch.Tensor
    tgt_in: torch.Tensor | None = None
    tgt_out: torch.Tensor | None = None
    fields: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def src_pad_mask(self) -> torch.Tensor:
        """(B, S) bool, True at padding."""
        return self.src_tokens.eq(PAD_ID)

    @property
    def num_tgt_tokens(self) -> int:
        """Number of non-padding target tokens (the loss normaliser)."""
        assert self.tgt_out is not None
        return int(self.tgt_out.ne(PAD_ID).sum())

    def to(self, device: torch.device | str) -> Batch:
        """Move every tensor to ``device`` (non-blocking where possible)."""

        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device, non_blocking=True)

        return Batch(
            src_tokens=self.src_tokens.to(device, non_blocking=True),
            src_lengths=self.src_lengths.to(device, non_blocking=True),
            ids=self.ids,
            tgt_in=move(self.tgt_in),
            tgt_out=move(self.tgt_out),
            fields={k: v.to(device, non_blocking=True) for k, v in self.fields.items()},
        )
