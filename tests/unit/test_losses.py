"""The label-smoothed cross-entropy: its closed-form gradient against autograd through log-softmax."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ordo.batch import PAD_ID
from ordo.losses import label_smoothed_nll


def reference(logits: torch.Tensor, targets: torch.Tensor, epsilon: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The textbook form, differentiated by autograd: (1 - ε) NLL + ε mean_v(-log p_v) over non-pad rows."""
    lprobs = F.log_softmax(logits, dim=-1)
    keep = targets.ne(PAD_ID)
    nll = -lprobs.gather(1, targets.unsqueeze(1)).squeeze(1)[keep].sum()
    smooth = -lprobs.mean(dim=-1)[keep].sum()
    return (1 - epsilon) * nll + epsilon * smooth, nll


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_loss_and_gradients_match_autograd_through_log_softmax(epsilon: float) -> None:
    torch.manual_seed(0)
    logits = torch.randn(7, 11, dtype=torch.float64) * 3
    targets = torch.tensor([4, 0, 10, 1, 0, 7, 2])  # two padded rows
    weights = torch.randn(2, dtype=torch.float64)  # a downstream use of both outputs
    ours = logits.clone().requires_grad_()
    theirs = logits.clone().requires_grad_()
    ours_loss, ours_nll = label_smoothed_nll(ours, targets, epsilon)
    ref_loss, ref_nll = reference(theirs, targets, epsilon)
    torch.testing.assert_close(ours_loss, ref_loss.float())
    torch.testing.assert_close(ours_nll, ref_nll.float())
    (weights[0] * ours_loss + weights[1] * ours_nll).backward()
    (weights[0] * ref_loss + weights[1] * ref_nll).backward()
    assert ours.grad is not None and theirs.grad is not None
    torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-5, atol=1e-6)
    assert ours.grad[targets.eq(PAD_ID)].abs().sum() == 0  # padding receives no gradient


def test_uniform_logits_cost_log_vocabulary_per_token() -> None:
    logits = torch.zeros(2, 3, 5)
    targets = torch.tensor([[1, 2, 0], [3, 0, 0]])  # 3 real tokens
    loss, nll = label_smoothed_nll(logits, targets, 0.1)
    assert loss.item() == pytest.approx(3 * math.log(5), rel=1e-6)
    assert nll.item() == pytest.approx(3 * math.log(5), rel=1e-6)


def test_gradient_of_the_loss_alone_through_a_bf16_input() -> None:
    torch.manual_seed(1)
    logits = torch.randn(4, 6).bfloat16().requires_grad_()
    loss, _ = label_smoothed_nll(logits, torch.tensor([1, 5, 0, 3]), 0.1)
    loss.backward()
    assert logits.grad is not None and logits.grad.dtype == torch.bfloat16
    assert torch.isfinite(logits.grad.float()).all() and logits.grad[2].abs().sum() == 0


def test_second_backward_through_one_loss_is_refused() -> None:
    logits = torch.randn(3, 4, requires_grad=True)
    loss, _ = label_smoothed_nll(logits, torch.tensor([1, 2, 3]), 0.1)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="second backward"):
        loss.backward()
