"""Distortion models for RNNsearch* (paper 003 Eq. 7-13): Γ, the mixed alignment, contexts, decoding, training."""

import pytest
import torch
from model_helpers import tiny, toy_batch

from ordo import api
from ordo.build import build_model
from ordo.checkpoint import step_checkpoints
from ordo.config import load_config
from ordo.decoding.search import beam_search, greedy_search
from ordo.errors import CheckpointError, ConfigError
from ordo.methods.distortion import DistortionAttention, shift_alignments

RNN_TINY = ["model.preset=rnn-tiny", "model.d_model=32", "model.embed_dim=32"]  # conftest's rnn_run


def rnn(*overrides, seed=0):
    return tiny(*overrides, seed=seed, preset="rnn-tiny")


def batch():
    return toy_batch(3, 7, 5, 1, 4, 5)


def test_shift_moves_mass_right_for_positive_jumps_with_zero_fill():
    alpha = torch.tensor([[0.1, 0.2, 0.7]])
    shifted = shift_alignments(alpha, 1)[0]
    assert torch.allclose(shifted, torch.tensor([[0.2, 0.7, 0.0], [0.1, 0.2, 0.7], [0.0, 0.1, 0.2]]))
    far = shift_alignments(alpha, 3)[0]
    assert far[0].tolist() == [0.0, 0.0, 0.0] and far[6].tolist() == [0.0, 0.0, 0.0]  # everything shifted out


def test_padded_positions_stay_zero_and_the_distortion_sums_to_one():
    attention = DistortionAttention(8, 8, 8, "hidden", 8, window=1, weight=0.5)
    previous = torch.tensor([[0.0, 0.0, 1.0, 0.0]])  # all on the last real word; position 3 is padding
    jumps = torch.tensor([[0.2, 0.5, 0.3]])  # k = -1, 0, +1
    d = attention.distortion(jumps, previous, torch.tensor([[False, False, False, True]]))
    # +1 would move 0.3 onto padding: dropped, then renormalized over the true length
    assert d[0].tolist() == pytest.approx([0.0, 0.2 / 0.7, 0.5 / 0.7, 0.0])


def test_mixed_alignments_sum_to_one_over_the_true_length():
    for context in ("source", "target", "hidden"):
        model = rnn(f"model.methods.distortion.context={context}").eval()
        alignment = model(batch()).extras["alignment"]  # (B, T, S)
        assert torch.allclose(alignment.sum(-1), torch.ones(3, 5), atol=1e-5), context
        assert alignment[1, :, 4:].abs().max() == 0.0, context


def test_the_three_contexts_change_only_the_jump_distribution():
    models = {c: rnn(f"model.methods.distortion.context={c}").eval() for c in ("source", "target", "hidden")}
    shapes = {c: {k: v.shape for k, v in m.state_dict().items()} for c, m in models.items()}
    differing = {k for k in shapes["hidden"] if shapes["hidden"][k] != shapes["source"][k]}
    assert differing == {"decoder.attention.jump.weight"}
    reference = models["hidden"].state_dict()
    for model in models.values():
        own = {k: (torch.zeros_like(v) if k == "decoder.attention.jump.weight" else reference[k])
               for k, v in model.state_dict().items()}
        model.load_state_dict(own)  # W = 0: P(k|Ψ) = softmax(b) whatever Ψ is
    outputs = [m(batch()).logits for m in models.values()]
    assert all(torch.allclose(outputs[0], o, atol=1e-6) for o in outputs[1:])


def test_gradients_reach_w_and_b():
    model = rnn("model.methods.distortion.context=source")
    model(batch()).logits.logsumexp(-1).sum().backward()
    jump = model.decoder.attention.jump
    assert jump.weight.grad.abs().sum() > 0 and jump.bias.grad.abs().sum() > 0


def test_incremental_scores_equal_teacher_forcing_and_beam_one_equals_greedy():
    model = rnn("model.methods.distortion.context=hidden").eval()
    b = batch()
    full = model(b).logits
    state = model.init_state(model.encode(b))
    steps = torch.stack([model.decode_step(b.tgt_in[:, t], state) for t in range(5)], dim=1)
    assert torch.allclose(full, steps, atol=1e-5)
    greedy = greedy_search(model, b, max_len_a=1.0, max_len_b=4)
    beam1 = beam_search(model, b, beam_size=1, max_len_a=1.0, max_len_b=4)
    assert [h[0].tokens for h in greedy] == [h[0].tokens for h in beam1]


def test_bad_options_are_configuration_errors():
    with pytest.raises(ConfigError, match="distortion.context: 'word' is not one of source, target, hidden"):
        rnn("model.methods.distortion.context=word")
    with pytest.raises(ConfigError, match="distortion.window: expected l >= 1, got 0"):
        rnn("model.methods.distortion.window=0")
    with pytest.raises(ConfigError, match="rnn family"):
        build_model(load_config(None, ["model.preset=tiny", "model.methods.distortion.window=2"]).model, 40, 40)
    with pytest.raises(ConfigError, match="distortion.window: 20 .*model.max_positions=16"):
        rnn("model.methods.distortion.window=20", "model.max_positions=16")


def test_distortion_trains_and_can_start_from_a_trained_rnnsearch(train_tiny, rnn_run, small_data, tmp_path):
    start = step_checkpoints(rnn_run / "checkpoints")[-1]
    losses = train_tiny(*RNN_TINY, "model.methods.distortion.context=hidden", f"train.init_from={start}", steps=30,
                        name="dist")
    assert losses[-1] < losses[0]
    log = (tmp_path / "dist" / "train.log").read_text()
    assert "initialised from" in log and "decoder.attention.jump.weight" in log
    fresh = train_tiny(*RNN_TINY, "model.methods.distortion.context=hidden", steps=30, name="fresh")
    assert losses[0] < fresh[0]  # the warm start is ahead at the first validation
    with pytest.raises(CheckpointError, match="shapes differ"):
        train_tiny("model.preset=rnn-tiny", "model.methods.distortion.context=hidden", f"train.init_from={start}",
                   steps=3, name="wrong")
    assert api.load_run(tmp_path / "dist", "last", "cpu").translate(["the dog sees a cat ."], beam_size=3)
