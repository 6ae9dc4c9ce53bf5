"""Reordering embeddings (paper 001, Eq. 6-9) and the additional-PE control: equations, decoding, training."""

import math

import pytest
import torch
from model_helpers import tiny, toy_batch

from ordo.build import count_parameters
from ordo.data.batch import Batch
from ordo.errors import ConfigError
from ordo.methods.reorder_emb import (
    PositionalPenalty,
    ReorderingDecoderLayer,
    ReorderingEncoderLayer,
    ReorderingStep,
)
from ordo.models.embeddings import SinusoidalPositions, sinusoidal_table
from ordo.models.transformer import TransformerDecoderLayer, TransformerEncoderLayer


def batch():
    return toy_batch(3, 6, 5, 2, 3, 1)


def test_penalty_lies_strictly_between_zero_and_one():
    penalty = PositionalPenalty(8)
    pp = penalty(torch.randn(2, 5, 8) * 10, torch.randn(2, 5, 8) * 10)
    assert pp.shape == (2, 5, 8) and bool((pp > 0).all()) and bool((pp < 1).all())


def test_reordering_step_matches_a_hand_computation():
    dim = 4
    step = ReorderingStep(dim, SinusoidalPositions(10, dim), PositionalPenalty(dim))
    w = [[0.5 * (i == j) for j in range(dim)] for i in range(dim)]
    w_bar = [[0.1 * (i + j) for j in range(dim)] for i in range(dim)]
    v = [[1.0 if j <= i else -1.0 for j in range(dim)] for i in range(dim)]
    with torch.no_grad():
        step.penalty.w.weight.copy_(torch.tensor(w))
        step.penalty.w_bar.weight.copy_(torch.tensor(w_bar))
        step.penalty.v.weight.copy_(torch.tensor(v))
    h_prev = [[0.3, -1.2, 0.8, 0.1], [1.0, 0.4, -0.5, 2.0]]
    h_bar = [[-0.7, 0.2, 1.5, -0.3], [0.6, -1.1, 0.0, 0.9]]
    out = step(torch.tensor([h_prev]), torch.tensor([h_bar]), start=2)[0]

    def matvec(m, x):
        return [sum(m[i][j] * x[j] for j in range(dim)) for i in range(dim)]

    for j in range(2):
        position = 2 + j + 1  # start=2: the third and fourth tokens
        pe = [math.sin(position / 10000 ** (2 * (i // 2) / dim)) if i % 2 == 0
              else math.cos(position / 10000 ** (2 * (i // 2) / dim)) for i in range(dim)]
        inner = [math.tanh(a + b) for a, b in zip(matvec(w, h_prev[j]), matvec(w_bar, h_bar[j]))]
        pp = [1 / (1 + math.exp(-x)) for x in matvec(v, inner)]
        pre = [h_bar[j][i] + pe[i] * pp[i] for i in range(dim)]
        mean = sum(pre) / dim
        var = sum((x - mean) ** 2 for x in pre) / dim
        expected = [(x - mean) / math.sqrt(var + 1e-5) for x in pre]
        assert out[j].tolist() == pytest.approx(expected, abs=1e-5)


def test_encoder_layer_takes_its_ffn_residual_from_the_attended_states():
    model = tiny("model.methods.reorder_emb.variant=encoder").eval()
    layer = model.encoder.layers[0]
    assert isinstance(layer, ReorderingEncoderLayer)
    x = torch.randn(2, 5, 64)
    ctx = type("Ctx", (), {"attn_mask": None})()
    h_bar = layer.attn_block.norm(x + layer.self_attn(x))
    c = layer.reorder.norm(h_bar + sinusoidal_table(6, 64)[1:6] * layer.reorder.penalty(x, h_bar))
    expected = layer.ffn_block.norm(h_bar + layer.ffn(c))
    assert torch.allclose(layer(x, ctx), expected, atol=1e-5)


def test_reordering_layers_run_the_baseline_forward_with_the_step_as_a_hook():
    assert ReorderingEncoderLayer.forward is TransformerEncoderLayer.forward
    assert ReorderingEncoderLayer.sublayers is TransformerEncoderLayer.sublayers
    assert ReorderingDecoderLayer.forward is TransformerDecoderLayer.forward


def test_variants_replace_the_right_layers_and_add_three_d_squared_per_layer():
    base = count_parameters(tiny())
    d, enc, dec = 64, 2, 2
    per_layer = 3 * d * d + 2 * d  # W, Wbar, V and the LN of C
    for variant, layers in (("encoder", enc), ("decoder", dec), ("both", enc + dec)):
        model = tiny(f"model.methods.reorder_emb.variant={variant}")
        assert count_parameters(model) - base == per_layer * layers, variant
    assert count_parameters(tiny("model.methods.additional_pe={}")) - base == 2 * d * enc


def test_gradients_reach_w_wbar_and_v_in_every_layer():
    model = tiny("model.methods.reorder_emb.variant=both")
    model(batch()).logits.logsumexp(-1).sum().backward()
    layers = [*model.encoder.layers, *model.decoder.layers]
    for layer in layers:
        for weight in (layer.reorder.penalty.w.weight, layer.reorder.penalty.w_bar.weight, layer.reorder.penalty.v.weight):
            assert weight.grad is not None and weight.grad.abs().sum() > 0


def test_step_by_step_decoding_equals_the_full_forward_pass():
    for variant in ("decoder", "both"):
        model = tiny(f"model.methods.reorder_emb.variant={variant}").eval()
        b = batch()
        full = model(b).logits
        state = model.init_state(model.encode(b))
        steps = torch.stack([model.decode_step(b.tgt_in[:, t], state) for t in range(b.tgt_in.size(1))], dim=1)
        assert torch.allclose(full, steps, atol=1e-5), variant


def test_padding_does_not_leak_into_reordered_encoder_states():
    model = tiny("model.methods.reorder_emb.variant=encoder").eval()
    b = batch()
    alone = Batch(b.src_tokens[2:3, :3], torch.tensor([3]), torch.arange(1), b.tgt_in[2:3], b.tgt_in[2:3])
    assert torch.allclose(model.encode(alone).states[0], model.encode(b).states[2, :3], atol=1e-5)


def test_bad_variant_and_pre_norm_are_configuration_errors():
    with pytest.raises(ConfigError, match="reorder_emb.variant: 'middle' is not one of encoder, decoder, both"):
        tiny("model.methods.reorder_emb.variant=middle")
    with pytest.raises(ConfigError, match="post-norm"):
        tiny("model.methods.reorder_emb.variant=both", "model.norm=pre")


def test_reorder_emb_trains_on_a_tiny_task(train_tiny):
    losses = train_tiny("model.methods.reorder_emb.variant=both")
    assert losses[-1] < 0.8 * losses[0] and losses[-1] < 3.0


def test_additional_pe_trains_on_a_tiny_task(train_tiny):
    losses = train_tiny("model.methods.additional_pe={}")
    assert losses[-1] < 0.8 * losses[0] and losses[-1] < 3.0
