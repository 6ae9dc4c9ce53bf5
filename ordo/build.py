"""build_model: preset -> slots -> methods -> model. The one place that imports both models and methods."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ordo.config import ModelConfig
from ordo.errors import ConfigError
from ordo.losses import AuxLoss
from ordo.methods import METHODS
from ordo.models.embeddings import ScaledEmbedding, SinusoidalPositions
from ordo.models.rnn import BiGRUEncoder, ConditionalGRUDecoder, RNNSearchModel
from ordo.models.slots import Slots
from ordo.models.transformer import TransformerDecoder, TransformerEncoder


@dataclass
class BuiltModel:
    """A model with the auxiliary losses and batch fields its methods declared."""

    model: nn.Module
    losses: list[AuxLoss]
    fields: tuple[str, ...]


def _check(cfg: ModelConfig, joint_vocab: bool) -> None:
    if cfg.share_embeddings == "all" and not joint_vocab:
        raise ConfigError("model.share_embeddings=all needs a joint vocabulary: set model.share_embeddings=decoder "
                          "(or none), or prepare with joint_vocab: true (a lattice corpus never has one)")


LAYER_COUNTS = {"encoder_layer": "encoder_layers", "decoder_layer": "decoder_layers"}  # slot -> its count's key


def _check_claims(slots: Slots) -> None:
    """Refuse a method that replaces a sub-block the model is not built from, which would leave the method
    silently off (or its loss without its input): the attention RNN is built from the ``rnn_attention`` slot
    alone, the Transformer from every other slot, and a stack of no layers has no layer to replace.

    Raises:
        ConfigError: naming the method, the slot and the family or the layer count.
    """
    for slot, method in slots.claims.items():
        if (slot == "rnn_attention") != (slots.cfg.family == "rnn"):
            raise ConfigError(f"model.methods.{method}: replaces the {slot} sub-block, which the {slots.cfg.family} "
                              f"family has not got")
        if slot in LAYER_COUNTS and getattr(slots.cfg, LAYER_COUNTS[slot]) == 0:
            raise ConfigError(f"model.methods.{method}: replaces every {slot} sub-block, and "
                              f"model.{LAYER_COUNTS[slot]} is 0")


def assemble_transformer(slots: Slots, src_vocab_size: int, tgt_vocab_size: int) -> nn.Module:
    """Build encoder, decoder and output layer from whatever the slots hold (docs/methods.md, "Baseline")."""
    cfg = slots.cfg
    norm_first = cfg.norm == "pre"
    table = SinusoidalPositions(cfg.max_positions, cfg.d_model)
    src_embed = ScaledEmbedding(src_vocab_size, cfg.d_model)
    tgt_embed = src_embed if cfg.share_embeddings == "all" else ScaledEmbedding(tgt_vocab_size, cfg.d_model)
    encoder = TransformerEncoder(
        src_embed,
        slots.source_positions(table),
        [slots.encoder_layer(i) for i in range(cfg.encoder_layers)],
        cfg.d_model,
        cfg.dropout,
        norm_first,
    )
    decoder = TransformerDecoder(
        tgt_embed, table, [slots.decoder_layer(i) for i in range(cfg.decoder_layers)], cfg.d_model, cfg.dropout, norm_first
    )
    tied = tgt_embed if cfg.share_embeddings in ("all", "decoder") else None
    output = slots.output(cfg.d_model, tgt_vocab_size, tied)
    model = slots.model_class(slots.encoder_wrapper(encoder), decoder, output)
    _init_linear_layers(model)
    return model


def assemble_rnn(slots: Slots, src_vocab_size: int, tgt_vocab_size: int) -> nn.Module:
    """RNNsearch* (paper 003 §2; docs/methods.md, "Distortion models"): embeddings of width embed_dim, GRU states of width d_model, context 2·d_model."""
    cfg = slots.cfg
    dim, embed_dim = cfg.d_model, cfg.embed_dim or cfg.d_model
    encoder = BiGRUEncoder(src_vocab_size, embed_dim, dim, cfg.dropout)
    attention = slots.rnn_attention(dim, 2 * dim, dim)
    decoder = ConditionalGRUDecoder(tgt_vocab_size, embed_dim, dim, 2 * dim, attention, cfg.dropout)
    return RNNSearchModel(encoder, decoder)


def _init_linear_layers(model: nn.Module) -> None:
    """Xavier-uniform weights and zero biases for every linear layer (as fairseq's Transformer)."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocab: bool = True) -> BuiltModel:
    """Build the model a resolved :class:`ModelConfig` describes, with its methods switched on.

    The methods' options were checked when ``cfg`` was built (:func:`ordo.config.method_options`).

    Raises:
        ConfigError: a method that does not fit the model (its family, its norm, a stack of no layers), or two
            methods claiming one sub-block.
    """
    _check(cfg, joint_vocab)
    slots = Slots(cfg)
    losses: list[AuxLoss] = []
    fields: list[str] = []
    for name, options in cfg.methods.items():
        method = METHODS[name]
        method.apply(slots, options)
        losses += method.losses(options)
        fields += method.fields
    _check_claims(slots)
    assemble = assemble_rnn if cfg.family == "rnn" else assemble_transformer
    model = assemble(slots, src_vocab_size, tgt_vocab_size)
    return BuiltModel(model, losses, tuple(fields))


def count_parameters(model: nn.Module) -> int:
    """Number of distinct parameters (shared embeddings counted once), whether or not they take gradients (a
    run loaded for translation has them all frozen)."""
    return sum(p.numel() for p in model.parameters())
