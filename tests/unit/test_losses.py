"""The output layer's label-smoothed cross-entropy: chunked, with its gradient in closed form, against
autograd through the full logits and log-softmax."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ordo import gemm
from ordo.data.batch import PAD_ID
from ordo.losses import output_nll


def reference(logits: torch.Tensor, targets: torch.Tensor, epsilon: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The textbook form, differentiated by autograd: (1 - ε) NLL + ε mean_v(-log p_v) over non-pad rows."""
    lprobs = F.log_softmax(logits.reshape(-1, logits.size(-1)), dim=-1)
    flat = targets.reshape(-1)
    keep = flat.ne(PAD_ID)
    nll = -lprobs.gather(1, flat.unsqueeze(1)).squeeze(1)[keep].sum()
    smooth = -lprobs.mean(dim=-1)[keep].sum()
    return (1 - epsilon) * nll + epsilon * smooth, nll


def layer_and_states(bias: bool) -> tuple[nn.Linear, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    layer = nn.Linear(6, 11, bias=bias).double()
    hidden = torch.randn(3, 5, 6, dtype=torch.float64) * 2
    targets = torch.tensor([[4, 1, 10, 0, 0], [7, 2, 3, 5, 0], [1, 1, 9, 8, 6]])  # three padded positions
    return layer, hidden, targets


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("chunk_rows", [1, 4, 100])
@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_loss_and_gradients_match_autograd_through_the_full_logits(epsilon: float, chunk_rows: int, bias: bool) -> None:
    layer, hidden, targets = layer_and_states(bias)
    ours = hidden.clone().requires_grad_()
    loss, nll = output_nll(ours, layer, targets, epsilon, chunk_rows=chunk_rows)
    (0.7 * loss).backward()
    ours_grads = [ours.grad] + [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    theirs = hidden.clone().requires_grad_()
    ref_loss, ref_nll = reference(layer(theirs), targets, epsilon)
    (0.7 * ref_loss).backward()
    torch.testing.assert_close(loss, ref_loss.float())
    torch.testing.assert_close(nll, ref_nll.float())
    for got, want in zip(ours_grads, [theirs.grad] + [p.grad for p in layer.parameters()]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert ours.grad is not None and ours.grad[targets.eq(PAD_ID)].abs().sum() == 0  # padding gets no gradient


def test_uniform_logits_cost_log_vocabulary_per_token() -> None:
    layer = nn.Linear(4, 5, bias=False)
    nn.init.zeros_(layer.weight)
    targets = torch.tensor([[1, 2, 0], [3, 0, 0]])  # 3 real tokens
    loss, nll = output_nll(torch.randn(2, 3, 4), layer, targets, 0.1)
    assert loss.item() == pytest.approx(3 * math.log(5), rel=1e-6)
    assert nll.item() == pytest.approx(3 * math.log(5), rel=1e-6)
    assert not nll.requires_grad  # for logging only


def test_bf16_autocast_runs_the_projection_in_bf16_and_keeps_parameter_dtypes() -> None:
    layer, hidden, targets = layer_and_states(bias=True)
    layer = layer.float()
    states = hidden.float().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = output_nll(states, layer, targets, 0.1, chunk_rows=4)
    loss.backward()
    full = reference(layer(hidden.float()), targets, 0.1)[0]
    assert loss.item() == pytest.approx(full.item(), rel=0.02)  # bf16 matmul, float32 softmax
    assert loss.item() != pytest.approx(full.item(), rel=1e-6)  # not silently in float32
    assert states.grad is not None and states.grad.dtype == torch.float32
    assert layer.weight.grad is not None and layer.weight.grad.dtype == torch.float32
    assert torch.isfinite(states.grad).all()


def test_no_gradient_work_in_inference_and_a_second_backward_is_refused() -> None:
    layer, hidden, targets = layer_and_states(bias=False)
    with torch.inference_mode():
        loss, nll = output_nll(hidden, layer, targets, 0.1)
    assert torch.isfinite(loss) and not loss.requires_grad and nll.item() > 0
    states = hidden.clone().requires_grad_()
    loss, _ = output_nll(states, layer, targets, 0.1)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="second backward"):
        loss.backward()


def test_bf16_training_pads_the_rows_to_the_bucket_and_masks_them(monkeypatch):
    layer, hidden, targets = layer_and_states(bias=True)
    layer = layer.float()
    rows_seen: list[int] = []
    linear = gemm.linear
    monkeypatch.setattr(gemm, "linear", lambda x, w, b=None: rows_seen.append(x.size(0)) or linear(x, w, b))

    def loss_and_grads() -> tuple[torch.Tensor, ...]:
        states = hidden.float().requires_grad_()
        layer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, nll = output_nll(states, layer, targets, 0.1, chunk_rows=4)
        loss.backward()
        return loss.detach(), nll, states.grad, layer.weight.grad.clone(), layer.bias.grad.clone()

    bucketed = loss_and_grads()
    assert rows_seen == [16], "12 real rows: one chunk, padded to a multiple of 16"
    monkeypatch.setattr(gemm, "bucketed_rows", lambda rows: rows)  # no padding
    monkeypatch.setattr(gemm, "ROW_BUCKET", 1)  # chunks of 4
    rows_seen.clear()
    plain = loss_and_grads()
    assert rows_seen == [4, 4, 4]
    for got, want in zip(bucketed, plain):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=2e-2, atol=4e-3)  # bf16 products, chunked differently
    assert bucketed[2][targets.eq(PAD_ID)].abs().sum() == 0  # padding gets no gradient


@pytest.mark.skipif(not gemm.onednn_available(), reason="this torch has no oneDNN linear kernel")
def test_float32_training_on_onednn_pads_the_rows_and_gives_torchs_loss_and_gradients(onednn_calls):
    layer, hidden, targets = layer_and_states(bias=True)
    layer = layer.float()

    def loss_and_grads() -> tuple[torch.Tensor, ...]:
        states = hidden.float().requires_grad_()
        layer.zero_grad()
        loss, nll = output_nll(states, layer, targets, 0.1, chunk_rows=4)
        loss.backward()
        return loss.detach(), nll, states.grad, layer.weight.grad.clone(), layer.bias.grad.clone()

    plain = loss_and_grads()  # torch's products
    assert onednn_calls == []
    with gemm.cpu_gemm("onednn"):
        padded = loss_and_grads()
    assert onednn_calls == [(16, 6), (16, 11), (11, 16)], \
        "12 real rows in one chunk padded to 16: logits, row gradient and weight gradient (its reduction over 16 rows)"
    for got, want in zip(padded, plain):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert padded[2][targets.eq(PAD_ID)].abs().sum() == 0  # padding gets no gradient
