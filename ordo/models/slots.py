"""The replaceable sub-blocks of the baseline, as factories with baseline defaults.

``ordo.build`` creates a :class:`Slots` for a model config, lets each enabled method replace the
factories it needs (:meth:`Slots.claim`), then assembles the model from whatever the slots hold. Two
methods claiming the same slot is a configuration error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from ordo.config import ModelConfig
from ordo.errors import ConfigError
from ordo.models.attention import CrossAttention, SelfAttention
from ordo.models.embeddings import SequentialSourcePositions, SinusoidalPositions
from ordo.models.rnn import MLPAttention
from ordo.models.transformer import (
    FeedForward,
    OutputProjection,
    TransformerDecoderLayer,
    TransformerEncoderLayer,
    TransformerModel,
)


@dataclass
class Slots:
    """Factories for each replaceable sub-block; every factory reads ``self.cfg``.

    Attributes:
        source_positions: ``(table) -> module`` mapping a Batch to the encodings added to the source.
        self_attention: ``(side, layer_index) -> module``; side is "encoder" or "decoder". An encoder one is
            called with ``packing=`` (a :class:`~ordo.models.packing.TokenPacking` or None): when it is set,
            its input and output are the (N, D) real tokens (see :meth:`SelfAttention.forward`); and with
            ``context=``, the :class:`~ordo.models.transformer.EncoderContext` where it may read a method's
            per-batch inputs (relation ids).
        encoder_layer: ``(layer_index) -> module`` with ``forward(x, ctx: EncoderContext)``.
        decoder_layer: ``(layer_index) -> module`` with the TransformerDecoderLayer interface.
        encoder_wrapper: ``(encoder) -> module`` around the whole encoder (e.g. ReFSR's two paths).
        output: ``(dim, vocab_size, tied_embedding) -> module`` producing logits.
        model_class: ``(encoder, decoder, output) -> module``, the Seq2Seq model that assembles them.
        rnn_attention: ``(query_dim, key_dim, attn_dim) -> module`` of the attention RNN (family rnn).
    """

    cfg: ModelConfig
    source_positions: Callable[[SinusoidalPositions], nn.Module] = SequentialSourcePositions
    self_attention: Callable[[str, int], nn.Module] = field(init=False)
    encoder_layer: Callable[[int], nn.Module] = field(init=False)
    decoder_layer: Callable[[int], nn.Module] = field(init=False)
    encoder_wrapper: Callable[[nn.Module], nn.Module] = lambda encoder: encoder
    output: Callable[[int, int, nn.Embedding | None], nn.Module] = OutputProjection
    model_class: Callable[..., nn.Module] = TransformerModel
    rnn_attention: Callable[[int, int, int], MLPAttention] = MLPAttention
    claims: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.self_attention = self.default_self_attention
        self.encoder_layer = self.default_encoder_layer
        self.decoder_layer = self.default_decoder_layer

    def claim(self, slot: str, method: str, factory: Any) -> None:
        """Let ``method`` replace ``slot`` with ``factory``; a second claim on one slot is an error."""
        if not hasattr(self, slot) or slot in ("cfg", "claims"):
            raise ValueError(f"unknown slot {slot!r}")
        if slot in self.claims:
            raise ConfigError(f"model.methods: {method} and {self.claims[slot]} both replace the {slot} sub-block")
        self.claims[slot] = method
        setattr(self, slot, factory)

    def default_self_attention(self, side: str, layer_index: int) -> nn.Module:
        """Plain multi-head self-attention."""
        return SelfAttention(self.cfg.d_model, self.cfg.heads, self.cfg.attention_dropout)

    def feed_forward(self) -> FeedForward:
        """The position-wise FFN of one layer."""
        return FeedForward(self.cfg.d_model, self.cfg.ffn_dim, self.cfg.activation_dropout)

    def encoder_layer_parts(self, layer_index: int) -> dict[str, Any]:
        """Constructor arguments of a baseline encoder layer, for subclasses that a method builds."""
        cfg = self.cfg
        return {
            "self_attn": self.self_attention("encoder", layer_index),
            "ffn": self.feed_forward(),
            "dim": cfg.d_model,
            "dropout": cfg.dropout,
            "norm_first": cfg.norm == "pre",
        }

    def decoder_layer_parts(self, layer_index: int) -> dict[str, Any]:
        """Constructor arguments of a baseline decoder layer, for subclasses that a method builds."""
        cfg = self.cfg
        return {
            "self_attn": self.self_attention("decoder", layer_index),
            "cross_attn": CrossAttention(cfg.d_model, cfg.heads, cfg.attention_dropout),
            "ffn": self.feed_forward(),
            "dim": cfg.d_model,
            "dropout": cfg.dropout,
            "norm_first": cfg.norm == "pre",
        }

    def default_encoder_layer(self, layer_index: int) -> nn.Module:
        """A baseline encoder layer built from the (possibly replaced) self-attention slot."""
        return TransformerEncoderLayer(**self.encoder_layer_parts(layer_index))

    def default_decoder_layer(self, layer_index: int) -> nn.Module:
        """A baseline decoder layer built from the (possibly replaced) self-attention slot."""
        return TransformerDecoderLayer(**self.decoder_layer_parts(layer_index))
