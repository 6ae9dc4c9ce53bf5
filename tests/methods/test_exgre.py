"""ExGRE and ReFSR (paper 000, Eq. 5-11): positions, Gaussian window, loss, shared weights, training."""

import math

import pytest
import torch
from model_helpers import tiny, toy_batch

from ordo.build import count_parameters
from ordo.config import load_config
from ordo.errors import ConfigError
from ordo.methods.exgre import (
    FIELD,
    PR_NAME,
    ExplicitReorderingLayer,
    GaussianPositions,
    ReorderingFusionEncoder,
    ReorderingLoss,
)
from ordo.models.embeddings import SinusoidalPositions, sinusoidal_table
from ordo.models.outputs import Seq2SeqOutput


def batch():
    positions = torch.tensor([[3, 1, 2, 5, 4, 0], [2, 1, 3, 0, 0, 0]])  # 1-based, 0 at EOS and padding
    return toy_batch(2, 6, 5, 1, 4, 4, fields={FIELD: positions})


def test_predicted_positions_lie_in_zero_to_the_true_length():
    gauss = GaussianPositions(8, SinusoidalPositions(50, 8), 0.5)
    lengths = torch.tensor([5, 3])
    b = gauss.predicted_positions(torch.randn(2, 7, 8) * 3, lengths)
    assert bool((b >= 0).all() and (b <= lengths[:, None]).all())
    with torch.no_grad():
        gauss.w.weight.copy_(torch.eye(8) * 10)
        gauss.v.weight.fill_(10.0)
    extreme = torch.stack([torch.ones(7, 8), -torch.ones(7, 8)])  # sigmoid saturates at 1 and at 0
    b = gauss.predicted_positions(extreme, lengths)
    assert torch.allclose(b[0], torch.full((7,), 5.0)) and torch.allclose(b[1], torch.zeros(7), atol=1e-6)


def test_gaussian_window_picks_the_nearest_position():
    table = SinusoidalPositions(50, 8)
    gauss = GaussianPositions(8, table, 0.5)
    pe = sinusoidal_table(51, 8)
    pr = gauss.encodings(torch.tensor([[2.2, 3.0, 4.5, 0.3]]), torch.tensor([6]))[0]
    assert torch.allclose(pr[0], pe[2] * math.exp(-(0.2**2) / (2 * 0.25)), atol=1e-6)
    assert torch.allclose(pr[1], pe[3], atol=1e-6)
    both = math.exp(-(0.5**2) / (2 * 0.25))  # exactly between 4 and 5: both at distance D
    assert torch.allclose(pr[2], both * (pe[4] + pe[5]), atol=1e-6)
    assert torch.equal(pr[3], torch.zeros(8))  # the nearest integer, 0, is not a position of the sentence


def test_the_soft_window_sums_every_position_of_the_sentence_as_eq_6():
    gauss = GaussianPositions(8, SinusoidalPositions(50, 8), 0.5, hard_window=False)
    pe = sinusoidal_table(51, 8)
    b, length = 2.2, 4
    pr = gauss.encodings(torch.tensor([[b]]), torch.tensor([length]))[0, 0]
    expected = sum(pe[s] * math.exp(-((s - b) ** 2) / (2 * 0.25)) for s in range(1, length + 1))
    assert torch.allclose(pr, expected, atol=1e-6)


def test_the_hard_window_gives_the_reordering_loss_no_gradient_on_b_and_the_soft_one_does():
    pe = sinusoidal_table(51, 8)
    for hard, expect_gradient in ((True, False), (False, True)):
        gauss = GaussianPositions(8, SinusoidalPositions(50, 8), 0.5, hard_window=hard)
        b = torch.tensor([[2.2, 4.7]], requires_grad=True)
        pr = gauss.encodings(b, torch.tensor([6]))
        loss = (1 - torch.nn.functional.cosine_similarity(pr, pe[torch.tensor([[5, 1]])], dim=-1)).mean()
        loss.backward()
        assert (b.grad.abs().max() > 1e-4) == expect_gradient, hard


def test_reordering_loss_is_zero_on_target_positions_and_skips_eos_and_padding():
    b = batch()
    positions = b.fields[FIELD]
    pe = sinusoidal_table(10, 16)
    exact = pe[positions]
    loss = ReorderingLoss()
    assert loss(Seq2SeqOutput(torch.zeros(1), torch.nn.Identity(), {PR_NAME: exact}), b).item() == pytest.approx(0.0, abs=1e-6)
    flipped = -exact
    flipped[positions == 0] = exact[positions == 0]  # what happens at EOS/padding must not count
    assert loss(Seq2SeqOutput(torch.zeros(1), torch.nn.Identity(), {PR_NAME: flipped}), b).item() == pytest.approx(2.0, abs=1e-5)


def test_exgre_wraps_every_encoder_layer_and_leaves_pr_of_the_last():
    model = tiny("model.methods.exgre.weight=0.5").eval()
    assert all(isinstance(layer, ExplicitReorderingLayer) for layer in model.encoder.layers)
    out = model(batch())
    assert out.extras[PR_NAME].shape == (2, 6, 64)


def test_gradients_reach_every_new_parameter():
    for method in ("exgre", "refsr"):
        model = tiny(f"model.methods.{method}.weight=0.6")
        b = batch()
        out = model(b)
        (out.logits.logsumexp(-1).sum() + ReorderingLoss()(out, b)).backward()
        new = [p for n, p in model.named_parameters() if ".reorder." in n or "fusion." in n]
        assert len(new) == (4 if method == "exgre" else 7), method  # W, v per layer (+ U_g, its bias, W_g)
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in new), method


def test_refsr_two_passes_share_weights():
    exgre, refsr = tiny("model.methods.exgre.weight=0.6"), tiny("model.methods.refsr.weight=0.6")
    assert count_parameters(refsr) - count_parameters(exgre) == 2 * 64 + 1  # only the fusion gate is new
    assert isinstance(refsr.encoder, ReorderingFusionEncoder)
    baseline = tiny().eval()
    renamed = {k.replace("encoder.inner.", "encoder.").replace(".layer.", "."): v for k, v in refsr.state_dict().items()
               if not k.startswith("encoder.fusion.") and ".reorder." not in k}
    baseline.load_state_dict(renamed)
    refsr.eval()
    b = batch()
    with refsr.encoder.plain_path():
        plain = refsr.encoder.inner(b).states
    assert torch.allclose(plain, baseline.encode(b).states, atol=1e-6)  # the plain path is the baseline encoder
    assert all(layer.active for layer in refsr.encoder.inner.layers)  # switched back on after the pass


def test_incremental_decoding_equals_the_full_pass_with_refsr():
    model = tiny("model.methods.refsr.weight=0.6").eval()
    b = batch()
    full = model(b).logits
    state = model.init_state(model.encode(b))
    steps = torch.stack([model.decode_step(b.tgt_in[:, t], state) for t in range(5)], dim=1)
    assert torch.allclose(full, steps, atol=1e-5)


def test_bad_window_is_a_configuration_error():
    with pytest.raises(ConfigError, match="window"):
        tiny("model.methods.exgre.window=0")


@pytest.mark.parametrize("method", ["exgre", "refsr"])
@pytest.mark.parametrize("setting", ["window=.inf", "window=.nan", "weight=-0.5", "weight=.nan", "weight=.inf"])
def test_non_finite_windows_and_negative_or_non_finite_weights_are_configuration_errors(method, setting):
    with pytest.raises(ConfigError, match=f"model.methods.{method}.{setting.split('=')[0]}: "):
        load_config(None, [f"model.methods.{method}.{setting}"])


@pytest.mark.parametrize("method", ["exgre", "refsr"])
def test_a_model_without_encoder_layers_is_a_configuration_error_not_a_missing_loss_input(method):
    with pytest.raises(ConfigError, match=f"model.methods.{method}: .*model.encoder_layers is 0"):
        tiny(f"model.methods.{method}.weight=0.5", "model.encoder_layers=0")


def test_a_window_beyond_the_position_table_is_a_configuration_error():
    with pytest.raises(ConfigError, match="exgre.window: 2000.0 .*model.max_positions=1024"):
        tiny("model.methods.exgre.window=2000")


def test_training_without_the_field_names_what_is_missing(train_tiny):
    with pytest.raises(ConfigError, match="reorder_positions"):
        train_tiny("model.methods.exgre.weight=0.6", steps=3)


def test_prepare_stores_target_order_positions_that_are_permutations(aligned_data):
    from ordo.data.corpus import ParallelData

    data = ParallelData.open(aligned_data, "train")
    assert FIELD in data.fields
    for index in range(50):
        row = data.fields[FIELD][index]
        assert sorted(row.tolist()) == list(range(1, len(data.src[index]) + 1))
    assert (aligned_data / "train.align").exists() and (aligned_data / "valid.align").exists()


@pytest.mark.parametrize("method", ["exgre", "refsr"])
def test_trains_on_a_tiny_task_and_with_the_soft_window_the_reordering_loss_falls(method, aligned_data, tmp_path):
    from ordo import api
    from ordo.checkpoint import load_checkpoint, step_checkpoints

    tiny_train = ["model.preset=tiny", "model.d_model=32", "model.ffn_dim=64", "train.max_tokens=400",
                  "train.warmup_steps=20", "train.lr=3e-3", "train.progress=false", "train.valid_bleu=false",
                  "train.threads=2", "train.max_steps=120", "train.valid_every=40", "train.log_every=20"]
    cfg = load_config(None, [f"data={aligned_data}", *tiny_train, f"model.methods.{method}.weight=0.6",
                             f"model.methods.{method}.hard_window=false"])
    api.train(cfg, tmp_path / method)
    losses = [load_checkpoint(p)["valid"]["loss"] for p in step_checkpoints(tmp_path / method / "checkpoints")]
    assert losses[-1] < 0.8 * losses[0] and losses[-1] < 3.0
    log = (tmp_path / method / "train.log").read_text().splitlines()
    cosine = [float(line.split("reorder_cos ")[1].split()[0]) for line in log if "reorder_cos " in line]
    assert len(cosine) == 6 and cosine[-1] < cosine[0]


def test_sim_of_a_trained_run_and_of_plain_positions(aligned_data, tmp_path):
    from ordo import api
    from ordo.analysis.sim import reordering_similarity
    from ordo.data.corpus import ParallelData

    cfg = load_config(None, [f"data={aligned_data}", "model.preset=tiny", "model.d_model=32", "model.ffn_dim=64",
                             "train.max_steps=5", "train.valid_every=5", "train.progress=false",
                             "train.valid_bleu=false", "model.methods.exgre.weight=0.6"])
    api.train(cfg, tmp_path / "run")
    result = reordering_similarity(tmp_path / "run", aligned_data, "test", "last", "cpu")
    data = ParallelData.open(aligned_data, "test")
    pe = sinusoidal_table(100, 32)
    cosines = [torch.nn.functional.cosine_similarity(pe[j + 1], pe[int(r)], dim=0).item()
               for i in range(len(data)) for j, r in enumerate(data.fields[FIELD][i])]
    assert result.pieces == len(cosines)
    assert result.sequential == pytest.approx(sum(cosines) / len(cosines), abs=1e-4)
    assert -1.0 <= result.learned <= 1.0 and 0.0 <= result.before_first <= 1.0


def test_sim_reports_the_pieces_whose_reordering_is_switched_off(aligned_data, tmp_path, monkeypatch):
    from ordo import api
    from ordo.analysis.sim import reordering_similarity
    from ordo.methods.exgre import GaussianPositions

    cfg = load_config(None, [f"data={aligned_data}", "model.preset=tiny", "model.d_model=32", "model.ffn_dim=64",
                             "train.max_steps=2", "train.valid_every=2", "train.progress=false",
                             "train.valid_bleu=false", "model.methods.exgre.weight=0.6"])
    api.train(cfg, tmp_path / "run")
    # every predicted position at 0.3: under the hard window no position lies within 0.5 of it, so pr = 0
    monkeypatch.setattr(GaussianPositions, "predicted_positions",
                        lambda self, states, lengths: torch.full(states.shape[:2], 0.3))
    result = reordering_similarity(tmp_path / "run", aligned_data, "test", "last", "cpu")
    assert result.before_first == 1.0 and result.learned == 0.0
    monkeypatch.setattr(GaussianPositions, "predicted_positions",
                        lambda self, states, lengths: torch.full(states.shape[:2], 1.0))
    result = reordering_similarity(tmp_path / "run", aligned_data, "test", "last", "cpu")
    assert result.before_first == 0.0 and result.learned > 0.0
