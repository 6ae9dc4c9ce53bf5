"""The real (non-padding) positions of a padded batch, so that position-wise work can skip the padding."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class TokenPacking:
    """Flat indices of the real positions of a (B, S) batch.

    :meth:`pack` gathers those positions of a (B, S, F) tensor into (N, F); :meth:`unpack` scatters (N, F)
    back into (B, S, F), with zeros at the padded positions. Both are differentiable.
    """

    real_tokens: torch.Tensor  # (N,) long, indices into the flattened B*S positions
    batch: int
    length: int

    @classmethod
    def of(cls, pad_mask: torch.Tensor, below: float) -> TokenPacking | None:
        """The packing of ``pad_mask`` (B, S), True at padding, when under ``below`` of its positions are real;
        None when they are not, as packing would not pay for its gather and scatter, and at once (without reading
        the mask) when ``below`` is 0 or less: a compiled step turns packing off so (:mod:`ordo.training.compiled`)."""
        if below <= 0.0:
            return None
        real = ~pad_mask.reshape(-1)  # (B*S,)
        if real.float().mean().item() >= below:
            return None
        return cls(real.nonzero().squeeze(1), pad_mask.size(0), pad_mask.size(1))

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(B, S, F) -> (N, F), the real positions in batch-major order."""
        return x.reshape(-1, x.size(-1)).index_select(0, self.real_tokens)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(N, F) -> (B, S, F), zeros at the padded positions."""
        flat = x.new_zeros(self.batch * self.length, x.size(-1)).index_copy_(0, self.real_tokens, x)  # (B*S, F)
        return flat.view(self.batch, self.length, -1)
