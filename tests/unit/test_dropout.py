"""ordo.models.dropout: inverted dropout with a uniform-float mask on the CPU."""

import pytest
import torch

from ordo.models.dropout import dropout


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_drops_a_fraction_p_and_scales_the_rest_so_the_mean_is_kept(p: float) -> None:
    torch.manual_seed(0)
    x = torch.rand(400, 500) + 1.0  # no zeros of its own
    out = dropout(x, p, training=True)
    dropped = out.eq(0)
    assert dropped.float().mean().item() == pytest.approx(p, abs=0.005)
    torch.testing.assert_close(out[~dropped], x[~dropped] / (1 - p))
    assert out.mean().item() == pytest.approx(x.mean().item(), rel=0.01)


def test_gradient_is_the_scaled_mask_and_eval_is_the_identity() -> None:
    torch.manual_seed(1)
    x = torch.randn(50, 40, requires_grad=True)
    out = dropout(x, 0.2, training=True)
    out.sum().backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad, out.ne(0).float() / 0.8)
    assert dropout(x, 0.2, training=False) is x
    assert dropout(x, 0.0, training=True) is x
    assert dropout(x, 1.0, training=True).abs().sum() == 0


def test_same_seed_same_mask_in_bf16() -> None:
    x = torch.randn(30, 30).bfloat16()
    torch.manual_seed(3)
    first = dropout(x, 0.5, training=True)
    torch.manual_seed(3)
    assert torch.equal(first, dropout(x, 0.5, training=True)) and first.dtype == torch.bfloat16
