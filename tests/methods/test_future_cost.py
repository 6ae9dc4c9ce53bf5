"""Future cost (paper 004 Eq. 8-14): the shifted loss, Model I = baseline at translation, Model II decoding."""

import math

import pytest
import torch
from model_helpers import tiny, toy_batch

from ordo import api
from ordo.cli import main
from ordo.data.batch import EOS_ID, Batch
from ordo.decoding.search import beam_search, greedy_search
from ordo.errors import ConfigError
from ordo.methods.future_cost import FutureCostConfig, FutureCostModel, future_cost_loss, mean_source_state
from ordo.models.outputs import Seq2SeqOutput
from ordo.models.transformer import TransformerModel


def batch():
    return toy_batch(3, 6, 5, 1, 4, 3)


def test_loss_reads_the_reference_at_the_same_step_and_ignores_padding():
    vocab = 4
    logits = torch.zeros(1, 3, vocab)  # t=0: uniform; t=1: sure of the reference; t=2: padding
    logits[0, 1, 2] = 50.0
    targets = torch.tensor([[3, 2, 0]])
    identity = torch.nn.Linear(vocab, vocab, bias=False)  # the output layer: future states are the logits
    torch.nn.init.eye_(identity.weight)
    out = Seq2SeqOutput(torch.zeros(1, 3, vocab), identity, {"future_hidden": logits})
    loss = future_cost_loss(out, Batch(torch.ones(1, 2, dtype=torch.long), torch.tensor([2]), torch.arange(1),
                                       targets, targets))
    assert loss.item() == pytest.approx(math.log(vocab) / 2, abs=1e-5)


def test_future_state_t_comes_from_the_state_and_word_of_step_t():
    model = tiny("model.methods.future_cost.model=1").eval()
    b = batch()
    encoder_out = model.encode(b)
    hidden = model.decoder(b.tgt_in, encoder_out)
    future = model.future_states(b.tgt_in, hidden, encoder_out)
    embed = model.decoder.embed
    first = model.future_cell(embed(torch.full((3,), EOS_ID)), mean_source_state(encoder_out))
    assert torch.allclose(future[:, 0], first, atol=1e-6)
    for t in range(1, 5):  # F_t = GRU(E[y_t], H_t); y_t = tgt_in[t], H_t = hidden[t - 1] (it predicted y_t)
        assert torch.allclose(future[:, t], model.future_cell(embed(b.tgt_in[:, t]), hidden[:, t - 1]), atol=1e-6)
    masked = mean_source_state(encoder_out)[1]
    assert torch.allclose(masked, encoder_out.states[1, :4].mean(0), atol=1e-6)  # true length, not padded


def test_future_states_at_t_do_not_see_later_words():
    model = tiny("model.methods.future_cost.model=2").eval()
    b = batch()
    before = model(b).extras["future_hidden"]
    b.tgt_in[:, 3] = 7
    after = model(b).extras["future_hidden"]
    assert torch.allclose(before[:, :3], after[:, :3], atol=1e-6)
    assert not torch.allclose(before[:, 3], after[:, 3])


def test_model_one_translates_exactly_like_the_baseline_with_the_same_weights():
    baseline = tiny().eval()
    model_one = tiny("model.methods.future_cost.model=1", seed=1).eval()
    missing, unexpected = model_one.load_state_dict(baseline.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("future_cell.") for k in missing)
    b = batch()
    assert torch.equal(model_one(b).logits, baseline(b).logits)
    ours = beam_search(model_one, b, beam_size=3, max_len_a=1.0, max_len_b=4)
    theirs = beam_search(baseline, b, beam_size=3, max_len_a=1.0, max_len_b=4)
    assert [[h.tokens for h in hs] for hs in ours] == [[h.tokens for h in hs] for hs in theirs]


def test_the_baseline_forward_and_step_run_with_the_future_cost_as_hooks():
    assert FutureCostModel.forward is TransformerModel.forward
    assert FutureCostModel.decode_step is TransformerModel.decode_step


def test_model_two_incremental_decoding_equals_the_full_pass_and_beam_one_equals_greedy():
    model = tiny("model.methods.future_cost.model=2").eval()
    assert isinstance(model, FutureCostModel) and model.gate is not None
    b = batch()
    full = model(b).logits
    state = model.init_state(model.encode(b))
    steps = torch.stack([model.decode_step(b.tgt_in[:, t], state) for t in range(5)], dim=1)
    assert torch.allclose(full, steps, atol=1e-5)
    greedy = greedy_search(model, b, max_len_a=1.0, max_len_b=4)
    beam1 = beam_search(model, b, beam_size=1, max_len_a=1.0, max_len_b=4)
    assert [h[0].tokens for h in greedy] == [h[0].tokens for h in beam1]


def test_gradients_reach_every_new_parameter():
    model = tiny("model.methods.future_cost.model=2")
    b = batch()
    out = model(b)
    (out.logits.logsumexp(-1).sum() + future_cost_loss(out, b)).backward()
    new = {n: p for n, p in model.named_parameters() if n.startswith(("future_cell.", "gate."))}
    assert len(new) == 5  # W_{r,z,} with biases, U_{r,z}, U, W_g
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in new.values()), new.keys()


def test_a_sampled_loss_estimates_the_exact_one_and_projects_only_its_positions():
    model = tiny("model.methods.future_cost.model=1")
    b = toy_batch(16, 6, 20, 1, 4, 3)  # 320 target positions
    out = model(b)
    exact = future_cost_loss(out, b).item()
    with torch.no_grad():  # validation: exact whatever the fraction
        assert future_cost_loss(out, b, sample_fraction=0.3).item() == pytest.approx(exact, rel=1e-6)
    future = out.extras["future_hidden"].detach().requires_grad_(True)
    sampled = Seq2SeqOutput(out.hidden, out.project, {"future_hidden": future})
    # the estimate's spread is ~9% of the mean per draw (320 positions, p = 0.3), ~0.5% over 300 draws
    estimates = [future_cost_loss(sampled, b, sample_fraction=0.3).item() for _ in range(300)]
    assert sum(estimates) / len(estimates) == pytest.approx(exact, rel=0.02)
    future_cost_loss(sampled, b, sample_fraction=0.3).backward()
    rows_with_gradient = future.grad.abs().sum(-1).gt(0).sum().item()
    assert 0.2 * 320 < rows_with_gradient < 0.4 * 320


def future_loss_gradients(*overrides: str) -> dict[str, torch.Tensor]:
    """The future-cost loss's gradient (alone) on each parameter of a tiny Model I/II, by name."""
    model = tiny(*overrides)
    b = batch()
    future_cost_loss(model(b), b).backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}


def test_detach_state_stops_the_future_cost_gradient_at_the_decoder_state():
    tied = future_loss_gradients("model.methods.future_cost.model=1")
    stopped = future_loss_gradients("model.methods.future_cost.model=1", "model.methods.future_cost.detach_state=true")
    assert any(n.startswith("decoder.layers.") for n in tied)
    assert not any(n.startswith(("decoder.layers.", "encoder.layers.")) for n in stopped), sorted(stopped)
    assert any(n.startswith("future_cell.") for n in stopped)


def test_own_output_gives_the_future_softmax_its_own_projection():
    untied = ("model.methods.future_cost.model=1", "model.share_embeddings=none")  # W_o apart from E
    shared = future_loss_gradients(*untied)
    own = future_loss_gradients(*untied, "model.methods.future_cost.own_output=true")
    assert "output.weight" in shared and "future_output.weight" not in shared
    assert "future_output.weight" in own and "output.weight" not in own
    model = tiny("model.methods.future_cost.model=1", "model.methods.future_cost.own_output=true").eval()
    b = batch()
    out = model(b)
    assert torch.allclose(out.logits, out.project(out.hidden)) and out.project is not model.future_output


def test_a_gate_bias_of_minus_three_starts_model_two_close_to_the_decoder_state():
    model = tiny("model.methods.future_cost.model=2", "model.methods.future_cost.gate_bias=-3").eval()
    torch.nn.init.zeros_(model.gate.w_g.weight)  # g = σ(-3) = 0.0474 whatever F and H
    dim = model.gate.w_g.in_features // 2
    future, hidden = torch.randn(2, 5, dim), torch.randn(2, 5, dim)
    g = 1.0 / (1.0 + math.exp(3.0))
    assert torch.allclose(model.gate(future, hidden), g * future + (1 - g) * hidden, atol=1e-6)
    b = batch()
    out = model(b)
    out.logits.sum().backward()
    assert model.gate.bias.grad is not None and model.gate.bias.grad.abs() > 0
    with pytest.raises(ConfigError, match="gate_bias"):
        tiny("model.methods.future_cost.model=1", "model.methods.future_cost.gate_bias=-3")


@pytest.mark.parametrize("fraction", ["0", "-0.5", "1.5"])
def test_a_sample_fraction_outside_zero_to_one_is_a_configuration_error(fraction):
    with pytest.raises(ConfigError, match="sample_fraction"):
        tiny(f"model.methods.future_cost.sample_fraction={fraction}")


@pytest.mark.parametrize("weight", ["-0.5", ".nan", ".inf"])
def test_a_negative_or_non_finite_weight_is_a_configuration_error(weight):
    with pytest.raises(ConfigError, match="future_cost.weight: "):
        tiny(f"model.methods.future_cost.weight={weight}")


def test_bad_model_number_is_a_configuration_error():
    with pytest.raises(ConfigError, match="future_cost.model: 3 is not one of 1, 2"):
        tiny("model.methods.future_cost.model=3")


def test_model_two_trains_and_logs_the_future_cost(train_tiny, tmp_path):
    losses = train_tiny("model.methods.future_cost.model=2", "model.methods.future_cost.weight=0.5",
                        "train.log_every=20")
    assert losses[-1] < 0.8 * losses[0] and losses[-1] < 3.0
    logged = [float(line.split("future_cost ")[1].split()[0])
              for line in (tmp_path / "run" / "train.log").read_text().splitlines() if "future_cost " in line]
    assert len(logged) == 6 and logged[-1] < logged[0]


def test_switching_it_on_from_the_command_line_round_trips_through_the_saved_config(small_data, tmp_path):
    run = tmp_path / "run"
    assert main(["train", "--data", str(small_data), "--preset", "tiny", "--out", str(run),
                 "--set", "model.methods.future_cost.model=2", "--set", "train.max_steps=2",
                 "--set", "train.valid_every=2", "--set", "train.progress=false",
                 "--set", "train.valid_bleu=false"]) == 0
    loaded = api.load_run(run, "last", "cpu")
    assert loaded.cfg.model.methods == {"future_cost": FutureCostConfig(model=2)}
    assert isinstance(loaded.model, FutureCostModel) and loaded.model.gate is not None
    assert len(loaded.translate(["the dog sees a cat ."], beam_size=2)) == 1
