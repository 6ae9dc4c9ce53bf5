"""The baseline Transformer encoder-decoder (Vaswani et al. 2017; docs/methods.md, "Baseline").

Post-norm by default, as the papers write it: ``C = LN(SelfAtt(H) + H); H' = LN(FFN(C) + C)``; pre-norm
(``H + SelfAtt(LN(H))``) as an option. Every replaceable sub-block (positions, self-attention, layers,
output projection) is passed in by ``ordo.build``, so a method replaces a block without a flag in these
classes; a method's layer overrides a hook of the baseline layer (``ffn_input``, ``cross_attention_input``),
and a method's per-batch inputs reach its modules through :class:`EncoderContext`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ordo.data.batch import Batch
from ordo.gemm import Linear, linear
from ordo.models.attention import CrossAttention, SelfAttention, key_padding_to_attn_mask
from ordo.models.dropout import dropout
from ordo.models.embeddings import ScaledEmbedding, SinusoidalPositions
from ordo.models.outputs import DecoderState, EncoderOutput, Seq2SeqOutput
from ordo.models.packing import TokenPacking

# the encoder's sublayers run on the real tokens alone when under this share of the positions are real: above
# it, too little padding is skipped to pay for the gather and scatter that packing adds
PACK_BELOW = 0.9


class FeedForward(nn.Module):
    """FFN(x) = W2 · ReLU(W1 x + b1) + b2 (Vaswani et al. 2017, Eq. 2)."""

    def __init__(self, dim: int, hidden: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.fc1 = Linear(dim, hidden)
        self.fc2 = Linear(hidden, dim)
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
    """What every encoder layer sees besides its input: masks, the batch (for method fields), inputs that a
    method makes from the batch once for all layers (:meth:`per_batch`, e.g. relation ids), and ``extras``
    where a layer may leave named outputs (e.g. ExGRE's pr^N).

    With much padding (batches sorted by target length, long lattices), :meth:`per_token` runs position-wise
    blocks on the real tokens alone: the FFN sublayer, and the self-attention sublayer but for the attention
    between the tokens (its projections take ``packing``). The padded positions' work is skipped at the cost
    of a gather and a scatter per layer, so the tokens are packed only when under ``pack_below`` of the
    positions are real.
    """

    pad_mask: torch.Tensor
    attn_mask: torch.Tensor | None
    batch: Batch
    pack_below: float = PACK_BELOW
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    packing: TokenPacking | None = field(init=False, default=None)  # the real positions, when packing them pays
    made: dict[Callable[[Batch], torch.Tensor], torch.Tensor] = field(init=False, default_factory=dict)  # per_batch

    def __post_init__(self) -> None:
        self.packing = TokenPacking.of(self.pad_mask, self.pack_below)

    def per_batch(self, make: Callable[[Batch], torch.Tensor]) -> torch.Tensor:
        """``make(batch)``, made at the first call with ``make`` (or an equal callable) and returned again at the
        later ones: an input of a method's modules that every layer reads, made once per forward pass."""
        if make not in self.made:
            self.made[make] = make(self.batch)
        return self.made[make]

    def per_token(self, x: torch.Tensor, block: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """``block`` on ``x`` (B, S, D); when :attr:`packing` is set, on its real tokens alone packed into
        (N, D), and the padded positions of the result are zeros. ``block`` maps each token on its own, or
        reads :attr:`packing` to see the others."""
        if self.packing is None:
            return block(x)
        return self.packing.unpack(block(self.packing.pack(x)))


class TransformerEncoderLayer(nn.Module):
    """H' = LN(FFN(C) + C) with C = LN(SelfAtt(H) + H) (post-norm, as paper 000 Eq. 2 writes it).

    A method's step between the sublayers overrides :meth:`ffn_input`, and sets :attr:`packs_tokens` False when
    that step reads positions in the padded (B, S) layout.
    """

    packs_tokens = True  # the sublayers may run on the real tokens alone when the context packs them

    def __init__(self, self_attn: SelfAttention, ffn: FeedForward, dim: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.self_attn = self_attn
        self.ffn = ffn
        self.attn_block = Residual(dim, dropout, norm_first)
        self.ffn_block = Residual(dim, dropout, norm_first)

    def forward(self, x: torch.Tensor, ctx: EncoderContext) -> torch.Tensor:
        """(B, S, D) -> (B, S, D); both sublayers on the real tokens alone when ``ctx`` packs them and
        :attr:`packs_tokens` allows it."""
        if not self.packs_tokens:
            return self.sublayers(x, ctx, None)
        return ctx.per_token(x, lambda h: self.sublayers(h, ctx, ctx.packing))

    def sublayers(self, x: torch.Tensor, ctx: EncoderContext, packing: TokenPacking | None) -> torch.Tensor:
        """Both residual sublayers on ``x``: (B, S, D), or with ``packing`` (N, D) the real tokens."""
        attended = self.attn_block(x, lambda h: self.self_attn(h, ctx.attn_mask, packing=packing, context=ctx))
        return self.ffn_block(attended, lambda h: self.ffn(self.ffn_input(x, h)))

    def ffn_input(self, layer_input: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """What the FFN reads of the self-attention sublayer's output ``attended`` (LN'd first in pre-norm): that
        output itself; a method's step between the sublayers overrides this, with the ``layer_input`` H."""
        return attended


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

    def forward(
        self,
        x: torch.Tensor,
        encoder_out: EncoderOutput,
        memory_mask: torch.Tensor | None,
        cache: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """(B, T, D) -> (B, T, D); with ``cache``, T is the new steps only and the cache grows."""
        attended = self.self_block(x, lambda h: self.self_attn(h, causal=True, cache=cache))
        sourced = self.cross_block(
            attended,
            lambda h: self.cross_attn(self.cross_attention_input(x, h, cache), encoder_out.states, memory_mask,
                                      cache),
        )
        return self.ffn_block(sourced, self.ffn)

    def cross_attention_input(
        self, layer_input: torch.Tensor, attended: torch.Tensor, cache: dict[str, torch.Tensor] | None
    ) -> torch.Tensor:
        """The queries that cross-attention reads of the self-attention sublayer's output ``attended`` (LN'd first
        in pre-norm): that output itself; a method's step between the sublayers overrides this, with the
        ``layer_input`` and the ``cache`` (which already holds the new steps' keys)."""
        return attended


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
    ) -> None:
        super().__init__()
        self.embed = embed
        self.positions = positions
        self.layers = nn.ModuleList(layers)
        self.dropout = dropout
        self.final_norm = nn.LayerNorm(dim) if norm_first else None
        self.pack_below = PACK_BELOW  # see EncoderContext; bench/lattice_train_speed.py sets it per model

    def forward(self, batch: Batch) -> EncoderOutput:
        """Encode ``batch.src_tokens`` (B, S) into states (B, S, D)."""
        pad_mask = batch.src_pad_mask
        x = self.embed(batch.src_tokens) + self.positions(batch)  # (B, S, D)
        x = dropout(x, self.dropout, self.training)
        ctx = EncoderContext(pad_mask, key_padding_to_attn_mask(pad_mask), batch, self.pack_below)
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

    @property
    def out_features(self) -> int:
        """V, the logits per row (as ``nn.Linear``'s)."""
        return self.weight.size(0)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """(…, D) -> (…, V)."""
        return linear(hidden, self.weight)


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
        return self.teacher_forced_output(batch.tgt_in, self.decoder(batch.tgt_in, encoder_out), encoder_out)

    def teacher_forced_output(
        self, tgt_in: torch.Tensor, hidden: torch.Tensor, encoder_out: EncoderOutput
    ) -> Seq2SeqOutput:
        """The output of the top decoder states ``hidden`` (B, T, D) for ``tgt_in`` (B, T): those states with the
        output layer and the encoder's extras; a method that adds to the top of the decoder overrides this."""
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
        logits = self.step_logits(prev_tokens, hidden.squeeze(1), state)
        state.step += 1
        return logits

    def step_logits(self, prev_tokens: torch.Tensor, hidden: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Logits (B, V) of the top decoder state ``hidden`` (B, D) that follows ``prev_tokens`` (B,) at step
        ``state.step``: the output layer's; a method that adds to the top of the decoder overrides this."""
        return self.output(hidden)
