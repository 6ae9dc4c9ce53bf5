"""Multi-head attention (Vaswani et al. 2017) on ``scaled_dot_product_attention``, with key/value caches
for incremental decoding, and a relation-aware variant (Shaw et al. 2018) whose relation ids a method gives
(relative positions, lattice relations).
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from ordo.data.batch import Batch
from ordo.gemm import Linear
from ordo.models.dropout import dropout
from ordo.models.packing import TokenPacking

# SDPA's kernels for CUDA without cuDNN's: cuDNN builds an execution plan for every new input shape, and token
# batches and incremental decoding bring new shapes all the time, so training and translation would keep
# paying for new plans
CUDA_SDPA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def fused_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None, dropout_p: float,
    is_causal: bool = False,
) -> torch.Tensor:
    """softmax(q k^T / sqrt(d_h) + mask) v (Vaswani et al. 2017, eq. 1) by ``scaled_dot_product_attention``;
    on CUDA through its flash, memory-efficient or math kernels (:data:`CUDA_SDPA_BACKENDS`).

    On the CPU, half-precision inputs that take gradients (training under autocast) are attended in float32 and
    the result cast back: PyTorch's CPU flash-attention backward is far slower in bf16 than in float32, more than
    the products gain there (measured in bench/RESULTS.md, "Speed against each peer on a CPU").
    """
    if q.device.type == "cpu" and q.dtype != torch.float32 and q.requires_grad and torch.is_grad_enabled():
        with torch.autocast("cpu", enabled=False):
            return fused_attention(q.float(), k.float(), v.float(), attn_mask, dropout_p, is_causal).to(q.dtype)
    with sdpa_kernel(CUDA_SDPA_BACKENDS) if q.is_cuda else contextlib.nullcontext():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal)


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, D/H)."""
    batch, length, dim = x.shape
    return x.view(batch, length, heads, dim // heads).transpose(1, 2)  # (B, H, T, Dh)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, Dh) -> (B, T, H*Dh)."""
    batch, heads, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * head_dim)  # (B, T, D)


def group_queries(q: torch.Tensor, group: int) -> torch.Tensor:
    """(B*G, H, T, Dh) -> (B, H, G*T, Dh): the queries of G consecutive rows as one row's queries."""
    if group == 1:
        return q
    rows, heads, length, head_dim = q.shape
    grouped = q.view(rows // group, group, heads, length, head_dim).transpose(1, 2)  # (B, H, G, T, Dh)
    return grouped.reshape(rows // group, heads, group * length, head_dim)


def ungroup_queries(out: torch.Tensor, group: int) -> torch.Tensor:
    """(B, H, G*T, Dh) -> (B*G, H, T, Dh), the inverse of :func:`group_queries`."""
    if group == 1:
        return out
    batch, heads, grouped_length, head_dim = out.shape
    length = grouped_length // group
    ungrouped = out.view(batch, heads, group, length, head_dim).transpose(1, 2)  # (B, G, H, T, Dh)
    return ungrouped.reshape(batch * group, heads, length, head_dim)


class BatchContext(Protocol):
    """What a self-attention module may read of the per-batch context its layer passes it (the encoder's
    :class:`~ordo.models.transformer.EncoderContext`)."""

    def per_batch(self, make: Callable[[Batch], torch.Tensor]) -> torch.Tensor:
        """``make(batch)``, made at the first call with ``make`` and returned again at every later one."""
        ...


def key_padding_to_attn_mask(pad_mask: torch.Tensor | None) -> torch.Tensor | None:
    """(B, S) True-at-padding -> (B, 1, 1, S) True-where-attention-is-allowed, the SDPA convention."""
    return None if pad_mask is None else ~pad_mask[:, None, None, :]


class SelfAttention(nn.Module):
    """Multi-head self-attention with one packed QKV projection.

    With ``cache`` (a dict the caller keeps per layer), keys and values of earlier steps are reused and the
    new ones appended: incremental decoding attends over the prefix without recomputing it.

    With ``packing`` (the encoder, on a much padded batch), the input and output projections run on the real
    tokens alone, (N, D); only the attention between them works on the padded (B, T) layout, where the
    padded positions get zero queries, keys and values (the keys are masked, the queries' outputs dropped).
    """

    def __init__(self, dim: int, heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"d_model={dim} is not divisible by heads={heads}")
        self.heads = heads
        self.dropout = dropout
        self.qkv = Linear(dim, 3 * dim)
        self.out = Linear(dim, dim)

    def project(
        self, x: torch.Tensor, cache: dict[str, torch.Tensor] | None, packing: TokenPacking | None = None
    ) -> tuple[torch.Tensor, ...]:
        """Queries, keys and values (B, H, T, Dh), keys/values extended by and stored in ``cache``; with
        ``packing``, ``x`` is the (N, D) real tokens and the padded positions get zeros."""
        qkv = self.qkv(x)  # (B, T, 3D), or (N, 3D) packed
        if packing is not None:
            qkv = packing.unpack(qkv)  # (B, T, 3D)
        q, k, v = (split_heads(t, self.heads) for t in qkv.chunk(3, dim=-1))  # 3 x (B, H, T, Dh)
        if cache is not None:
            if "self_k" in cache:
                k = torch.cat([cache["self_k"], k], dim=2)  # (B, H, T_past + T, Dh)
                v = torch.cat([cache["self_v"], v], dim=2)
            cache["self_k"], cache["self_v"] = k, v
        return q, k, v

    def output(self, out: torch.Tensor, packing: TokenPacking | None) -> torch.Tensor:
        """The output projection of the heads' outputs ``out`` (B, H, T, Dh): (B, T, D), or with ``packing``
        (N, D) of the real tokens alone."""
        merged = merge_heads(out)  # (B, T, D)
        return self.out(merged if packing is None else packing.pack(merged))

    def forward(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        causal: bool = False,
        cache: dict[str, torch.Tensor] | None = None,
        packing: TokenPacking | None = None,
        context: BatchContext | None = None,
    ) -> torch.Tensor:
        """Attend ``x`` (B, T, D) to itself; (B, T, D).

        Args:
            attn_mask: (B, 1, 1, T) bool, True where a key may be attended (see key_padding_to_attn_mask).
            causal: mask future positions (training of the decoder; ignored when ``cache`` holds a prefix).
            cache: per-layer incremental state, updated in place.
            packing: the real positions of the (B, T) batch; ``x`` and the result are then (N, D), the real
                tokens alone.
            context: the encoder's per-batch context, where a method's attention reads what it needs of the
                batch (:class:`RelationSelfAttention`'s relation ids); the plain attention reads nothing there.
        """
        q, k, v = self.project(x, cache, packing)
        # without a cache, one query and one key attend alike either way: the length is not read (a compiled
        # step's lengths are symbolic, and SDPA takes a plain bool)
        is_causal = causal and (cache is None or q.size(2) > 1)
        out = fused_attention(q, k, v, attn_mask, self.dropout if self.training else 0.0, is_causal)  # (B, H, T, Dh)
        return self.output(out, packing)


class CrossAttention(nn.Module):
    """Multi-head attention from decoder states to encoder states; the encoder keys/values are cached."""

    def __init__(self, dim: int, heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.q = Linear(dim, dim)
        self.kv = Linear(dim, 2 * dim)
        self.out = Linear(dim, dim)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        attn_mask: torch.Tensor | None,
        cache: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Attend queries ``x`` (R, T, D) to ``memory`` (B, S, D) under ``attn_mask`` (B, 1, 1, S).

        R is B times a group size G: query rows ``i * G`` to ``(i + 1) * G - 1`` all attend to memory row ``i``
        (beam search's hypotheses of one sentence, see :class:`~ordo.models.outputs.DecoderState`); they are
        stacked as G * T queries of that row, so the keys and values are read once per sentence.
        """
        group = x.size(0) // memory.size(0)  # not divmod: a compiled step's sizes are symbolic, which it refuses
        if not group or group * memory.size(0) != x.size(0):
            raise ValueError(f"{x.size(0)} query rows do not make groups over {memory.size(0)} memory rows")
        q = group_queries(split_heads(self.q(x), self.heads), group)  # (B, H, G*T, Dh)
        if cache is not None and "src_k" in cache:
            k, v = cache["src_k"], cache["src_v"]
        else:
            k, v = (split_heads(t, self.heads) for t in self.kv(memory).chunk(2, dim=-1))  # (B, H, S, Dh)
            if cache is not None:  # contiguous: attention over them runs faster at every later step
                k, v = k.contiguous(), v.contiguous()
                cache["src_k"], cache["src_v"] = k, v
        out = fused_attention(q, k, v, attn_mask, self.dropout if self.training else 0.0)  # (B, H, G*T, Dh)
        return self.out(merge_heads(ungroup_queries(out, group)))


def prefix_lengths(attn_mask: torch.Tensor) -> torch.Tensor | None:
    """The number of keys each row may attend, (B,), when ``attn_mask`` (B, 1, 1, S) allows exactly a prefix of
    the keys in every row (padding at the end); None for any other mask."""
    lengths = attn_mask.sum(dim=-1).view(-1)  # (B,)
    positions = torch.arange(attn_mask.size(-1), device=attn_mask.device)
    if not torch.equal(positions[None, :] < lengths[:, None], attn_mask.view(lengths.size(0), -1)):
        return None
    return lengths


def length_groups(lengths: torch.Tensor, ratio: float) -> list[tuple[torch.Tensor, int]]:
    """Rows grouped by length for attention without most of the padding: from the longest row down, a group
    takes every row longer than its longest row's length / ``ratio``.

    Returns:
        (row indices, the group's longest length) pairs, longest group first.
    """
    sorted_lengths, order = lengths.sort()
    values = sorted_lengths.tolist()
    groups, end = [], len(values)
    while end > 0:
        longest = values[end - 1]
        start = min(bisect.bisect_right(values, longest / ratio, 0, end), end - 1)
        groups.append((order[start:end], int(longest)))
        end = start
    return groups


class RelationSelfAttention(SelfAttention):
    """Self-attention with relation embeddings on keys and values, shared by all heads (Shaw et al. 2018):

    e_ab = q_a · (k_b + a^K_{r(a,b)}) / sqrt(d_k),   o_a = Σ_b α_ab (v_b + a^V_{r(a,b)})   (Eq. 3-4; paper 002 Eq. 4-5)

    r(a, b) are ids in [0, num_relations) from :meth:`relation_ids`: ``relations_of(batch)``, made once per
    forward pass in the context the encoder layers share (a method's subclass may give them otherwise, e.g.
    from the positions of the decoder's steps). The relation terms are computed per relation, not per pair:
    q @ a^K^T gives (B, H, T, R) scores that are gathered by id, and attention weights are summed into relation
    bins before multiplying by a^V, so memory grows with T*R rather than T*T*Dh.

    The (B, H, T, T) work grows with the square of the padded length, so over a key-padding mask (the encoder)
    the rows are attended in groups of similar length (:func:`length_groups`, longest/shortest <= GROUP_RATIO),
    each cut to its own longest row; padded query positions then output zeros, and the rows' real positions
    get what the whole padded batch gives them.
    """

    GROUP_RATIO = 1.3  # longest/shortest row within a group: more groups, more passes; fewer, more padding

    def __init__(
        self, dim: int, heads: int, num_relations: int, relations_of: Callable[[Batch], torch.Tensor],
        dropout: float = 0.0,
    ) -> None:
        super().__init__(dim, heads, dropout)
        head_dim = dim // heads
        self.num_relations = num_relations
        self.relations_of = relations_of  # batch -> (B or 1, S, S); layers with equal ones share what it makes
        self.rel_keys = nn.Embedding(num_relations, head_dim)
        self.rel_values = nn.Embedding(num_relations, head_dim)
        nn.init.normal_(self.rel_keys.weight, std=head_dim**-0.5)
        nn.init.normal_(self.rel_values.weight, std=head_dim**-0.5)

    def forward(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        causal: bool = False,
        cache: dict[str, torch.Tensor] | None = None,
        packing: TokenPacking | None = None,
        context: BatchContext | None = None,
    ) -> torch.Tensor:
        """As :meth:`SelfAttention.forward`, with the relation ids of :meth:`relation_ids`."""
        q, k, v = self.project(x, cache, packing)
        relations = self.relation_ids(q, k, context)
        q = q * q.size(-1) ** -0.5
        lengths = prefix_lengths(attn_mask) if attn_mask is not None and cache is None and not causal else None
        if attn_mask is not None and lengths is not None:
            out = self.attend_by_length(q, k, v, relations, attn_mask, lengths)
        else:
            out = self.attend(q, k, v, relations, attn_mask, causal)
        return self.output(out, packing)

    def relation_ids(self, q: torch.Tensor, k: torch.Tensor, context: BatchContext | None) -> torch.Tensor:
        """r(a, b) (B or 1, T_query, T_key) long of queries ``q`` (B, H, T_query, Dh) and keys ``k`` (B, H, T_key,
        Dh): ``relations_of`` the batch, from ``context``."""
        if context is None:
            raise ValueError("RelationSelfAttention reads its relation ids from the context its layer passes")
        return context.per_batch(self.relations_of)

    def attend_by_length(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        relations: torch.Tensor,
        attn_mask: torch.Tensor,
        lengths: torch.Tensor,
    ) -> torch.Tensor:
        """:meth:`attend` over groups of rows of similar ``lengths``, each cut to its longest row; (B, H, T, Dh)
        with zeros at the padded query positions."""
        groups = length_groups(lengths, self.GROUP_RATIO)
        if len(groups) == 1 and groups[0][1] == q.size(2):
            return self.attend(q, k, v, relations, attn_mask, causal=False)
        out = None  # in the dtype attention returns (under autocast it may differ from q's)
        for rows, length in groups:
            group_relations = relations[:, :length, :length]
            if group_relations.size(0) > 1:
                group_relations = group_relations[rows]
            group_out = self.attend(
                q[rows, :, :length], k[rows, :, :length], v[rows, :, :length], group_relations,
                attn_mask[rows, ..., :length], causal=False,
            )
            out = group_out.new_zeros(q.shape) if out is None else out
            out[rows, :, :length] = group_out
        assert out is not None
        return out

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        relations: torch.Tensor,
        attn_mask: torch.Tensor | None,
        causal: bool,
    ) -> torch.Tensor:
        """Eq. 3-4 for scaled queries ``q`` (B, H, Tq, Dh), keys and values (B, H, Tk, Dh): (B, H, Tq, Dh)."""
        rel_ids = relations.unsqueeze(1).expand(q.size(0), q.size(1), q.size(2), k.size(2))  # (B, H, Tq, Tk)
        rel_scores = torch.matmul(q, self.rel_keys.weight.t())  # (B, H, Tq, R)
        # in place where autograd allows: each out-of-place op would allocate and write one more (B, H, Tq, Tk)
        scores = torch.matmul(q, k.transpose(-1, -2)).add_(rel_scores.gather(-1, rel_ids))  # (B, H, Tq, Tk)
        if attn_mask is not None:  # additive, so the backward pass needs no masking pass
            scores = scores.add_(torch.zeros(attn_mask.shape, dtype=scores.dtype, device=q.device)
                                 .masked_fill_(~attn_mask, float("-inf")))
        if causal and q.size(2) > 1:
            future = torch.ones(q.size(2), k.size(2), dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill_(future, float("-inf"))
        weights = dropout(scores.softmax(dim=-1), self.dropout, self.training)  # (B, H, Tq, Tk)
        binned = weights.new_zeros(weights.shape[:-1] + (self.num_relations,)).scatter_add_(-1, rel_ids, weights)
        return torch.matmul(weights, v).add_(torch.matmul(binned, self.rel_values.weight))  # (B, H, Tq, Dh)
