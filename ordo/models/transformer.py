"""The baseline Transformer encoder-decoder (Vaswani et al. 2017; SPEC §0).

Post-norm by default, as the papers write it: ``C = LN(SelfAtt(H) + H); H' = LN(FFN(C) + C)``; pre-norm
(``H + SelfAtt(LN(H))``) as an option. Every replaceable sub-block (positions, self-attention, layers,
relation ids, output projection) is passed in by ``ordo.build``, so a method replaces a block without a
flag in these classes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ordo.data.batch import Batch
from ordo.models.attention import CrossAttention, SelfAttention, key_padding_to_attn_mask
from ordo.models.dropout import dropout
from ordo.models.embeddings import ScaledEmbedding, SinusoidalPositions
from ordo.models.outputs import DecoderState, EncoderOutput, Seq2SeqOutput
from ordo.models.packing import TokenPacking


class FeedForward(nn.Module):
    """FFN(x) = W2 · ReLU(W1 x + b1) + b2 (Vaswani et al. 2017, Eq. 2)."""

    def __init__(self, dim: int, hidden: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, D)."""
        return self.fc2(dropout(F.relu(self.fc1(x)), self.dropout, self.training))


class Residual(nn.Module):
    """A residual connection with layer norm and dropout around a sub-block.

    post-norm: ``LN(x + dropout(f(x)))``; pre-norm: ``x + dropout(f(LN(x)))``.
    """

    def __init__(self, dim: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.dropout = dropout
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, block: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """Apply ``block`` to ``x`` (B, T, D) inside the residual."""
        if self.norm_first:
            return x + dropout(block(self.norm(x)), self.dropout, self.training)
        return self.norm(x + dropout(block(x), self.dropout, self.training))


@dataclass
class EncoderContext:
    """What every encoder layer sees besides its input: masks, optional relation ids, the batch (for
    method fields), and ``extras`` where a layer may leave named outputs (e.g. ExGRE's pr^N).

    With much padding (batches sorted by target length, long lattices), :meth:`per_token` runs position-wise
    blocks on the real tokens alone: the FFN sublayer, and the self-attention sublayer but for the attention
    between the tokens (its projections take ``packing``). On the IWSLT17 Zh batches, where 1.4x the real
    source positions are padded, the FFN gave +6-14% training tokens/s, the attention sublayer +4-5% more on
    the lattices (jieba: +0%).
    """

    pad_mask: torch.Tensor
    attn_mask: torch.Tensor | None
    batch: Batch
    relations: torch.Tensor | None = None
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    packing: TokenPacking | None = field(init=False, default=None)  # the real positions, from pad_mask, when
    # packing pays

    PACK_BELOW = 0.9  # per-token blocks run on the real tokens alone when fewer than this share are real

    def __post_init__(self) -> None:
        self.packing = TokenPacking.of(self.pad_mask, self.PACK_BELOW)

    def per_token(self, x: torch.Tensor, block: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """``block`` on ``x`` (B, S, D); when :attr:`packing` is set, on its real tokens alone packed into
        (N, D), and the padded positions of the result are zeros. ``block`` maps each token on its own, or
        reads :attr:`packing` to see the others."""
        if self.packing is None:
            return block(x)
        return self.packing.unpack(block(self.packing.pack(x)))


class TransformerEncoderLayer(nn.Module):
    """H' = LN(FFN(C) + C) with C = LN(SelfAtt(H) + H) (post-norm; SPEC §0)."""

    def __init__(self, self_attn: SelfAttention, ffn: FeedForward, dim: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.self_attn = self_attn
        self.ffn = ffn
        self.attn_block = Residual(dim, dropout, norm_first)
        self.ffn_block = Residual(dim, dropout, norm_first)

    def forward(self, x: torch.Tensor, ctx: EncoderContext) -> torch.Tensor:
        """(B, S, D) -> (B, S, D); both sublayers on the real tokens alone when ``ctx`` packs them."""
        return ctx.per_token(x, lambda h: self.sublayers(h, ctx))

    def sublayers(self, x: torch.Tensor, ctx: EncoderContext) -> torch.Tensor:
        """Both residual sublayers on ``x``: (B, S, D), or (N, D) the real tokens when ``ctx.packing`` is set."""
        attended = self.attn_block(
            x, lambda h: self.self_attn(h, ctx.attn_mask, relations=ctx.relations, packing=ctx.packing)
        )
        return self.ffn_block(attended, self.ffn)


class TransformerDecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder, FFN; each in a residual block."""

    def __init__(
        self,
        self_attn: SelfAttention,
        cross_attn: CrossAttention,
        ffn: FeedForward,
        dim: int,
        dropout: float,
        norm_first: bool,
    ) -> None:
        super().__init__()
        self.self_attn = self_attn
        self.cross_attn = cross_attn
        self.ffn = ffn
        self.self_block = Residual(dim, dropout, norm_first)
        self.cross_block = Residual(dim, dropout, norm_first)
        self.ffn_block = Residual(dim, dropout, norm_first)

    def self_relations(self, x: torch.Tensor, cache: dict[str, torch.Tensor] | None) -> torch.Tensor | None:
        """Relation ids (1, T, T_past + T) for the masked self-attention of the new steps ``x``; the baseline
        has none, a method (relative positions) overrides this."""
        return None

    def forward(
        self,
        x: torch.Tensor,
        encoder_out: EncoderOutput,
        memory_mask: torch.Tensor | None,
        cache: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """(B, T, D) -> (B, T, D); with ``cache``, T is the new steps only and the cache grows."""
        relations = self.self_relations(x, cache)
        x = self.self_block(x, lambda h: self.self_attn(h, causal=True, cache=cache, relations=relations))
        x = self.cross_block(x, lambda h: self.cross_attn(h, encoder_out.states, memory_mask, cache))
        return self.ffn_block(x, self.ffn)


class TransformerEncoder(nn.Module):
    """Embeddings + positions, N layers, a final LN in pre-norm mode."""

    def __init__(
        self,
        embed: ScaledEmbedding,
        positions: nn.Module,
        layers: list[nn.Module],
        dim: int,
        dropout: float,
        norm_first: bool,
        relations: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.embed = embed
        self.positions = positions
        self.layers = nn.ModuleList(layers)
        self.dropout = dropout
        self.final_norm = nn.LayerNorm(dim) if norm_first else None
        self.relations = relations

    def forward(self, batch: Batch) -> EncoderOutput:
        """Encode ``batch.src_tokens`` (B, S) into states (B, S, D)."""
        pad_mask = batch.src_pad_mask
        x = self.embed(batch.src_tokens) + self.positions(batch)  # (B, S, D)
        x = dropout(x, self.dropout, self.training)
        relations = self.relations(batch) if self.relations is not None else None
        ctx = EncoderContext(pad_mask, key_padding_to_attn_mask(pad_mask), batch, relations)
        for layer in self.layers:
            x = layer(x, ctx)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return EncoderOutput(x, pad_mask, ctx.extras)


class TransformerDecoder(nn.Module):
    """Target embeddings + positions, N layers with caches, a final LN in pre-norm mode."""

    def __init__(
        self,
        embed: ScaledEmbedding,
        positions: SinusoidalPositions,
        layers: list[nn.Module],
        dim: int,
        dropout: float,
        norm_first: bool,
    ) -> None:
        super().__init__()
        self.embed = embed
        self.positions = positions
        self.layers = nn.ModuleList(layers)
        self.dropout = dropout
        self.final_norm = nn.LayerNorm(dim) if norm_first else None

    def forward(
        self,
        tgt_in: torch.Tensor,
        encoder_out: EncoderOutput,
        caches: list[dict[str, torch.Tensor]] | None = None,
        start: int = 0,
    ) -> torch.Tensor:
        """Hidden states (B, T, D) for ``tgt_in`` (B, T) whose first token is at 0-based step ``start``."""
        length = tgt_in.size(1)
        pe = self.positions.table[start + 1 : start + length + 1].unsqueeze(0)  # (1, T, D)
        x = dropout(self.embed(tgt_in) + pe, self.dropout, self.training)
        memory_mask = key_padding_to_attn_mask(encoder_out.pad_mask)
        for index, layer in enumerate(self.layers):
            x = layer(x, encoder_out, memory_mask, None if caches is None else caches[index])
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x


class OutputProjection(nn.Module):
    """Logits = H W_o^T, with W_o optionally the (shared) target embedding matrix (Press & Wolf 2017)."""

    weight: torch.Tensor

    def __init__(self, dim: int, vocab_size: int, tied: nn.Embedding | None = None) -> None:
        super().__init__()
        if tied is None:
            self.weight = nn.Parameter(torch.empty(vocab_size, dim).normal_(0.0, dim**-0.5))
        else:
            self.weight = tied.weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """(…, D) -> (…, V)."""
        return F.linear(hidden, self.weight)


class TransformerModel(nn.Module):
    """Encoder-decoder that follows :class:`ordo.models.outputs.Seq2SeqModel`."""

    def __init__(self, encoder: nn.Module, decoder: TransformerDecoder, output: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.output = output
        self.max_output_tokens: int | None = decoder.positions.max_positions - 1  # BOS and EOS take one position

    def forward(self, batch: Batch) -> Seq2SeqOutput:
        """Teacher-forced top decoder states (B, T, D) for ``batch.tgt_in`` with the output layer, plus the
        encoder's named extras."""
        assert batch.tgt_in is not None
        encoder_out = self.encoder(batch)
        hidden = self.decoder(batch.tgt_in, encoder_out)
        return Seq2SeqOutput(hidden, self.output, dict(encoder_out.extras))

    def encode(self, batch: Batch) -> EncoderOutput:
        """Encoder states of ``batch``."""
        return self.encoder(batch)

    def init_state(self, encoder_out: EncoderOutput) -> DecoderState:
        """Empty per-layer caches; the first :meth:`decode_step` fills the encoder keys/values. Cross-attention
        reads the source side through row groups, so beam hypotheses share it (``shares_source``)."""
        return DecoderState(encoder_out, caches=[{} for _ in self.decoder.layers], shares_source=True)

    def decode_step(self, prev_tokens: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Logits (B, V) of the next token after ``prev_tokens`` (B,), using and extending the caches."""
        hidden = self.decoder(prev_tokens.unsqueeze(1), state.encoder, state.caches, start=state.step)  # (B, 1, D)
        state.step += 1
        return self.output(hidden.squeeze(1))
