"""Token embeddings scaled by sqrt(d) and sinusoidal position encodings (Vaswani et al. 2017, §3.4-3.5)."""

from __future__ import annotations

import math

import torch
from torch import nn

from ordo.data.batch import PAD_ID, Batch


def sinusoidal_table(num_positions: int, dim: int) -> torch.Tensor:
    """PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)) for p = 0..num_positions-1.

    Returns:
        (num_positions, dim) float32 table; row p is PE(p). Row 0 is unused by ordo (positions are 1-based).
    """
    positions = torch.arange(num_positions, dtype=torch.float64).unsqueeze(1)  # (P, 1)
    rates = torch.exp(torch.arange(0, dim, 2, dtype=torch.float64) * (-math.log(10000.0) / dim))  # (ceil(d/2),)
    table = torch.zeros(num_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(positions * rates)
    table[:, 1::2] = torch.cos(positions * rates[: dim // 2])
    return table.float()


class SinusoidalPositions(nn.Module):
    """A fixed table of sinusoidal encodings looked up by 1-based position ids."""

    table: torch.Tensor

    def __init__(self, max_positions: int, dim: int) -> None:
        super().__init__()
        self.max_positions = max_positions
        self.register_buffer("table", sinusoidal_table(max_positions + 1, dim), persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        """PE of ``positions`` (any shape of ints in 1..max_positions); returns ``positions.shape + (d,)``."""
        return self.table[positions]

    def first(self, length: int) -> torch.Tensor:
        """PE(1..length) as (1, length, d)."""
        if length > self.max_positions:
            raise ValueError(f"sequence of {length} tokens exceeds model.max_positions={self.max_positions}")
        return self.table[1 : length + 1].unsqueeze(0)


class SequentialSourcePositions(nn.Module):
    """Baseline source positions: token j (0-based) gets PE(j + 1). Methods such as LPE replace this slot."""

    def __init__(self, table: SinusoidalPositions) -> None:
        super().__init__()
        self.table = table

    def forward(self, batch: Batch) -> torch.Tensor:
        """Position encodings to add to the source embeddings, (1, S, d)."""
        return self.table.first(batch.src_tokens.size(1))


class ScaledEmbedding(nn.Embedding):
    """Token embedding multiplied by sqrt(d) (Vaswani et al. 2017, §3.4); padding row fixed at zero."""

    def __init__(self, num_embeddings: int, dim: int) -> None:
        super().__init__(num_embeddings, dim, padding_idx=PAD_ID)
        self.scale = math.sqrt(dim)
        nn.init.normal_(self.weight, mean=0.0, std=dim**-0.5)
        with torch.no_grad():
            self.weight[PAD_ID].zero_()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Embeddings of ``tokens`` (B, T) as (B, T, d), scaled."""
        return super().forward(tokens) * self.scale
