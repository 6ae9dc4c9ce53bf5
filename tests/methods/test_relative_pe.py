"""Relative position representations (Shaw et al. 2018): relation ids, decoding, gradients, training."""

import pytest
import torch
from model_helpers import tiny, toy_batch

from ordo.errors import ConfigError
from ordo.methods.relative_pe import RelativeSelfAttention, relative_ids
from ordo.models.attention import RelationSelfAttention, SelfAttention
from ordo.models.transformer import TransformerDecoderLayer


def batch():
    return toy_batch(2, 7, 6, 1, 5, 2)


def test_relative_ids_are_clipped_distances():
    ids = relative_ids(torch.arange(2, 4), torch.arange(4), clip=1)
    # queries 2 and 3 against keys 0..3: distances (-2,-1,0,1) and (-3,-2,-1,0), clipped to ±1, shifted by 1
    assert ids.tolist() == [[[0, 0, 1, 2], [0, 0, 0, 1]]]


def test_encoder_and_decoder_use_relation_attention_and_decoder_can_be_left_plain():
    model = tiny("model.methods.relative_pe.clip=3")
    assert all(isinstance(layer.self_attn, RelationSelfAttention) for layer in model.encoder.layers)
    assert all(layer.self_attn.rel_keys.num_embeddings == 7 for layer in model.decoder.layers)
    assert all(type(layer) is TransformerDecoderLayer and isinstance(layer.self_attn, RelativeSelfAttention)
               for layer in model.decoder.layers)  # the ids come from the attention, not from a layer of its own
    plain = tiny("model.methods.relative_pe.decoder=false")
    assert all(type(layer.self_attn) is SelfAttention for layer in plain.decoder.layers)


def test_step_by_step_decoding_equals_the_full_forward_pass():
    model = tiny("model.methods.relative_pe.clip=2").eval()
    b = batch()
    full = model(b).logits
    state = model.init_state(model.encode(b))
    steps = torch.stack([model.decode_step(b.tgt_in[:, t], state) for t in range(b.tgt_in.size(1))], dim=1)
    assert torch.allclose(full, steps, atol=1e-5)


def test_step_by_step_decoding_equals_the_full_forward_pass_with_reordering_decoder_layers():
    model = tiny("model.methods.relative_pe.clip=2", "model.methods.reorder_emb.variant=decoder").eval()
    b = batch()
    full = model(b).logits
    state = model.init_state(model.encode(b))
    steps = torch.stack([model.decode_step(b.tgt_in[:, t], state) for t in range(b.tgt_in.size(1))], dim=1)
    assert torch.allclose(full, steps, atol=1e-5)


def test_gradients_reach_relation_tables_on_both_sides():
    model = tiny("model.methods.relative_pe.clip=2")
    model(batch()).logits.logsumexp(-1).sum().backward()
    for layer in [*model.encoder.layers, *model.decoder.layers]:
        assert layer.self_attn.rel_keys.weight.grad.abs().sum() > 0
        assert layer.self_attn.rel_values.weight.grad.abs().sum() > 0


def test_non_positive_clip_is_a_configuration_error():
    with pytest.raises(ConfigError, match="relative_pe.clip"):
        tiny("model.methods.relative_pe.clip=0")
    with pytest.raises(ConfigError, match="relative_pe.clip: 20 must be below model.max_positions=16"):
        tiny("model.methods.relative_pe.clip=20", "model.max_positions=16")


@pytest.mark.parametrize("method", ["relative_pe.clip=4", "reorder_emb.variant=both", "additional_pe={}"])
def test_a_transformer_method_on_the_rnn_family_is_a_configuration_error_not_silently_off(method):
    with pytest.raises(ConfigError, match=f"model.methods.{method.split('.')[0].split('=')[0]}: .*rnn family"):
        tiny(f"model.methods.{method}", preset="rnn-tiny")


def test_relative_pe_trains_on_a_tiny_task(train_tiny):
    losses = train_tiny("model.methods.relative_pe.clip=4")
    assert losses[-1] < 0.8 * losses[0] and losses[-1] < 3.0
