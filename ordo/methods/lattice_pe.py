"""Lattice positional encoding LPE (Xiao et al. 2019, paper 002 §3, "Lattice Positional Encoding").

Edge e_{i:j} of a source lattice gets PE(i + 1), the position of its first element, instead of PE of its
index in the edge sequence; EOS gets PE(N + 1) after the last element. Along every path from v_0 to v_N
the positions increase, since the next edge e_{j:k} starts where e_{i:j} ends. No parameters are added;
the data must be a lattice corpus (``ordo prepare`` with a ``lattice`` section), which provides the
per-edge fields ``lattice_start`` and ``lattice_end``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ordo.data.batch import Batch
from ordo.data.lattice.graph import FIELDS, batch_spans
from ordo.errors import ConfigError
from ordo.methods.registry import Method, register_method
from ordo.models.embeddings import SinusoidalPositions
from ordo.models.slots import Slots


@dataclass
class LatticePEConfig:
    """Options of ``model.methods.lattice_pe`` (none: ``--set 'model.methods.lattice_pe={}'``)."""


def lattice_positions(batch: Batch) -> torch.Tensor:
    """1-based LPE positions i + 1 of every source token (B, S); EOS and padding get N + 1 (paper 002 §3)."""
    start, _ = batch_spans(batch)
    return start + 1


class LatticeSourcePositions(nn.Module):
    """The source_positions slot: PE(i + 1) for edge e_{i:j} (paper 002 §3, "LPE")."""

    def __init__(self, table: SinusoidalPositions) -> None:
        super().__init__()
        self.table = table

    def forward(self, batch: Batch) -> torch.Tensor:
        """Position encodings (B, S, d) to add to the source embeddings."""
        positions = lattice_positions(batch)  # (B, S)
        if int(positions.max()) > self.table.max_positions:
            raise ValueError(f"lattice position {int(positions.max())} exceeds model.max_positions="
                             f"{self.table.max_positions}")
        return self.table(positions)


def apply_lattice_pe(slots: Slots, cfg: LatticePEConfig) -> None:
    """Replace the source positions by lattice positions (paper 002 §3)."""
    if slots.cfg.family != "transformer":
        raise ConfigError("model.methods.lattice_pe: implemented for the Transformer family only")
    slots.claim("source_positions", "lattice_pe", LatticeSourcePositions)


register_method(Method("lattice_pe", LatticePEConfig, apply_lattice_pe, fields=FIELDS))
