"""The torch device a ``train.device`` setting or a ``--device`` option names: translation resolves it as much
as training does, so it lives below ordo.training."""

from __future__ import annotations

import torch

from ordo.errors import ConfigError


def resolve_device(setting: str, local_rank: int = 0) -> torch.device:
    """``auto`` picks CUDA (this process's local GPU) when available, else the CPU.

    Raises:
        ConfigError: naming the setting when it is not a device, or names CUDA on a machine without it.
    """
    if setting == "auto":
        setting = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device("cuda", local_rank) if setting == "cuda" else torch.device(setting)
    except RuntimeError:
        raise ConfigError(f"device {setting!r}: expected auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {setting!r}: CUDA is not available here (use auto or cpu)")
    return device
