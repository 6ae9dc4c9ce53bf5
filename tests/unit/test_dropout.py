"""ordo.models.dropout: inverted dropout with a 16-bit random mask on the CPU."""

import pytest
import torch

from ordo.models.dropout import MASK_LEVELS, dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_drops_a_fraction_p_and_scales_the_rest_so_the_mean_is_kept(p: float) -> None:
    torch.manual_seed(0)
    x = torch.rand(400, 500) + 1.0  # no zeros of its own
    out = dropout(x, p, training=True)
    dropped = out.eq(0)
    assert dropped.float().mean().item() == pytest.approx(p, abs=0.005)
    rounded_p = round(p * MASK_LEVELS) / MASK_LEVELS  # the mask's drop probability
    torch.testing.assert_close(out[~dropped], x[~dropped] / (1 - rounded_p))
    assert out.mean().item() == pytest.approx(x.mean().item(), rel=0.01)


def test_gradient_is_the_scaled_mask_and_eval_is_the_identity() -> None:
    torch.manual_seed(1)
    x = torch.randn(50, 40, requires_grad=True)
    out = dropout(x, 0.2, training=True)
    out.sum().backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad, out.ne(0).float() / (1 - round(0.2 * MASK_LEVELS) / MASK_LEVELS))
    assert dropout(x, 0.2, training=False) is x
    assert dropout(x, 0.0, training=True) is x
    assert dropout(x, 1.0, training=True).abs().sum() == 0


def test_same_seed_same_mask_in_bf16() -> None:
    x = torch.randn(30, 30).bfloat16()
    torch.manual_seed(3)
    first = dropout(x, 0.5, training=True)
    torch.manual_seed(3)
    assert torch.equal(first, dropout(x, 0.5, training=True)) and first.dtype == torch.bfloat16


def test_mask_levels_are_uniform_in_every_slot_of_the_random_words() -> None:
    torch.manual_seed(4)
    keep, keep_prob = keep_mask(torch.Size([4 * 50_000 + 3]), 0.25)  # not a multiple of 4: the tail is cut
    assert keep.shape == (200_003,) and keep_prob == 0.75
    for slot in range(4):  # the 4 int16 levels read from one int64 draw: each drops a quarter
        assert (~keep[slot:200_000:4]).float().mean().item() == pytest.approx(0.25, abs=0.006)


def test_keep_probability_rounds_p_to_the_mask_resolution() -> None:
    _, keep_prob = keep_mask(torch.Size([8]), 0.1)
    assert keep_prob == 1 - 6554 / 65536
    assert keep_mask(torch.Size([1000]), 1e-7)[0].all()  # below half a level: nothing drops
