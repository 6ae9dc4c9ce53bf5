"""The torch device a ``train.device`` setting or a ``--device`` option names: translation resolves it as much
as training does, so it lives below ordo.training."""

from __future__ import annotations

import torch


def resolve_device(setting: str, local_rank: int = 0) -> torch.device:
    """``auto`` picks CUDA (this process's local GPU) when available, else the CPU."""
    if setting == "auto":
        setting = "cuda" if torch.cuda.is_available() else "cpu"
    if setting == "cuda":
        return torch.device("cuda", local_rank)
    return torch.device(setting)
