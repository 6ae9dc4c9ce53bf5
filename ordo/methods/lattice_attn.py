"""Lattice-aware self-attention LSA (Xiao et al. 2019, paper 002 §3, Eq. 4-5).

Every encoder layer's self-attention gets Shaw-style relation embeddings on keys and values::

    e_ab = q_a · (k_b + a^K_{r(a,b)}) / sqrt(d_k),   o_a = Σ_b α_ab (v_b + a^V_{r(a,b)})

with one table of 8 relations per layer shared by all heads, through the baseline's
:class:`ordo.models.attention.RelationSelfAttention`. For token a = e_{i:j} and token b = e_{p:q}, r(a, b) is
(first match):

    self  a is b            lad  j = p (a ends where b starts)   rad  q = i (b ends where a starts)
    inc   i <= p < q <= j   ind  p <= i < j <= q                 pre  j < p      suc  q < i
    its   otherwise (the spans overlap and neither contains the other)

The relation ids are computed from the spans with broadcasting, (B, S, S), no loop over pairs, once per batch
in the encoder's context for all layers; EOS is the edge e_{N:N+1} after the last element. The decoder is
unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ordo.data.batch import Batch
from ordo.data.lattice.graph import FIELDS, batch_spans
from ordo.errors import ConfigError
from ordo.methods.registry import Method, register_method
from ordo.models.attention import RelationSelfAttention
from ordo.models.slots import Slots

RELATIONS = ("self", "lad", "rad", "inc", "ind", "its", "pre", "suc")  # relation id = index


@dataclass
class LatticeAttnConfig:
    """Options of ``model.methods.lattice_attn`` (none: ``--set 'model.methods.lattice_attn={}'``)."""


def lattice_relations(start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """Relation ids r(a, b) in [0, 8) of every token pair (paper 002, Table 1, plus ``self``).

    Built in place from the lowest-priority rule up, each later rule overwriting the earlier ones, so the
    first match in the order of the module docstring wins; the ids are uint8 until the end.

    Args:
        start, end: (B, S) spans (i, j) of the edges e_{i:j}.

    Returns:
        (B, S, S) long; entry [n, a, b] is the relation of token a to token b, ids as in :data:`RELATIONS`.
    """
    i, j = start[:, :, None], end[:, :, None]  # (B, S, 1) query a = e_{i:j}
    p, q = start[:, None, :], end[:, None, :]  # (B, 1, S) key b = e_{p:q}
    size = start.size(1)
    relations = torch.full((start.size(0), size, size), RELATIONS.index("its"), dtype=torch.uint8, device=start.device)
    relations.masked_fill_(q < i, RELATIONS.index("suc"))
    relations.masked_fill_(j < p, RELATIONS.index("pre"))
    relations.masked_fill_((p <= i) & (j <= q), RELATIONS.index("ind"))
    relations.masked_fill_((i <= p) & (q <= j), RELATIONS.index("inc"))
    relations.masked_fill_(q == i, RELATIONS.index("rad"))
    relations.masked_fill_(j == p, RELATIONS.index("lad"))
    relations.diagonal(dim1=1, dim2=2).fill_(RELATIONS.index("self"))
    return relations.long()


def batch_relations(batch: Batch) -> torch.Tensor:
    """r(a, b) (B, S, S) of every source token pair of a batch of lattice edges, from the batch's spans."""
    return lattice_relations(*batch_spans(batch))


def apply_lattice_attn(slots: Slots, cfg: LatticeAttnConfig) -> None:
    """Relation-aware self-attention with the 8 lattice relations in every encoder layer (paper 002 Eq. 4-5)."""
    if slots.cfg.family != "transformer":
        raise ConfigError("model.methods.lattice_attn: implemented for the Transformer family only")
    model_cfg = slots.cfg
    plain_attention = slots.self_attention

    def attention(side: str, index: int) -> nn.Module:
        if side == "encoder":
            return RelationSelfAttention(
                model_cfg.d_model, model_cfg.heads, len(RELATIONS), batch_relations, model_cfg.attention_dropout
            )
        return plain_attention(side, index)

    slots.claim("self_attention", "lattice_attn", attention)


register_method(Method("lattice_attn", LatticeAttnConfig, apply_lattice_attn, fields=FIELDS))
