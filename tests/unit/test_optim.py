"""The optimiser and its schedule: the inverse-square-root formula by hand, and the fused Adam kernel (the
trainer's fast path) against PyTorch's per-parameter loop."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from ordo.config import TrainConfig
from ordo.training.optim import build_optimizer, inverse_sqrt_lr, set_lr


def test_learning_rate_warms_up_linearly_then_falls_with_the_inverse_square_root():
    cfg = TrainConfig(lr=1e-3, warmup_steps=400, warmup_init_lr=1e-7)
    assert inverse_sqrt_lr(100, cfg) == pytest.approx(1e-7 + (1e-3 - 1e-7) * 100 / 400)
    assert inverse_sqrt_lr(400, cfg) == pytest.approx(1e-3)
    assert inverse_sqrt_lr(1600, cfg) == pytest.approx(1e-3 * math.sqrt(400 / 1600))  # half the peak
    rising = [inverse_sqrt_lr(step, cfg) for step in range(1, 400)]
    assert rising == sorted(rising)


def _tiny_model() -> nn.Module:
    """The same small initialised network on every call."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


def _trained_copy(weight_decay: float, fused: bool) -> tuple[nn.Module, torch.optim.Optimizer]:
    """:func:`_tiny_model` after five steps of the optimiser on fixed data: ordo's (fused) or the loop form."""
    model = _tiny_model()
    cfg = TrainConfig(weight_decay=weight_decay)
    if fused:
        optimizer = build_optimizer(model, cfg)
    else:
        kind = torch.optim.AdamW if weight_decay > 0 else torch.optim.Adam
        extra = {"weight_decay": weight_decay} if weight_decay > 0 else {}
        optimizer = kind(model.parameters(), lr=cfg.warmup_init_lr, betas=cfg.adam_betas, eps=cfg.adam_eps,
                         foreach=False, **extra)
    inputs, targets = torch.randn(16, 6), torch.randint(0, 3, (16,))
    for step in range(1, 6):
        set_lr(optimizer, 1e-2 * step)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
    return model, optimizer


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_fused_adam_takes_the_steps_of_the_per_parameter_loop(weight_decay):
    fused, fused_optimizer = _trained_copy(weight_decay, fused=True)
    loop, loop_optimizer = _trained_copy(weight_decay, fused=False)
    assert fused_optimizer.defaults["fused"] and not loop_optimizer.defaults["fused"]
    assert type(fused_optimizer) is type(loop_optimizer)  # AdamW exactly when weight decay is asked for
    for fused_param, loop_param in zip(fused.parameters(), loop.parameters()):
        torch.testing.assert_close(fused_param, loop_param, rtol=1e-5, atol=1e-6)
    assert any(not torch.equal(a, b) for a, b in zip(fused.parameters(), _tiny_model().parameters()))
