"""Adam with the inverse-square-root schedule (Vaswani et al. 2017, Eq. 3, in fairseq's form)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ordo.config import TrainConfig


def build_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """Adam (β1, β2, ε from the config), or AdamW when ``weight_decay`` > 0.

    The fused implementation (one kernel over all parameters) on CPU and CUDA: 10% more training tokens/s than
    the per-parameter loop on the bench shape (bench/peers.py).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    kwargs = {"lr": cfg.warmup_init_lr, "betas": cfg.adam_betas, "eps": cfg.adam_eps, "fused": fused}
    if cfg.weight_decay > 0:
        return torch.optim.AdamW(params, weight_decay=cfg.weight_decay, **kwargs)  # type: ignore[arg-type]
    return torch.optim.Adam(params, **kwargs)  # type: ignore[arg-type]


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict[str, Any], cfg: TrainConfig) -> None:
    """Restore a checkpoint's optimizer ``state`` (Adam's moments and step counts) under the hyperparameters of
    ``cfg``: torch's ``load_state_dict`` brings back the β, ε and weight decay the checkpoint was saved with, so a
    resumed run would otherwise ignore a changed ``train.adam_betas``, ``adam_eps`` or ``weight_decay`` (and keep
    decoupled decay on or off against the optimizer :func:`build_optimizer` chose) while its config.yaml says
    otherwise. The learning rate is the schedule's (:func:`set_lr`)."""
    optimizer.load_state_dict(state)
    for group in optimizer.param_groups:
        group.update(betas=tuple(cfg.adam_betas), eps=cfg.adam_eps, weight_decay=cfg.weight_decay)
        if "decoupled_weight_decay" in group:  # Adam and AdamW share one implementation, told apart by this flag
            group["decoupled_weight_decay"] = cfg.weight_decay > 0


def inverse_sqrt_lr(step: int, cfg: TrainConfig) -> float:
    """Learning rate at update ``step`` (1-based): linear warm-up from ``warmup_init_lr`` to ``lr`` over
    ``warmup_steps``, then ``lr · sqrt(warmup_steps / step)``."""
    warmup = max(cfg.warmup_steps, 1)
    if step < warmup:
        return cfg.warmup_init_lr + (cfg.lr - cfg.warmup_init_lr) * step / warmup
    return cfg.lr * math.sqrt(warmup / step)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the learning rate of every parameter group."""
    for group in optimizer.param_groups:
        group["lr"] = lr
