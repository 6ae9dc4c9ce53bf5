"""Mixed precision: the autocast dtype a ``train.amp`` / ``decode.amp`` setting names, and its context."""

from __future__ import annotations

import contextlib

import torch

from ordo.errors import ConfigError

AMP_DTYPES: dict[str, torch.dtype | None] = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def amp_dtype(mode: str, device: torch.device, where: str = "amp") -> torch.dtype | None:
    """The autocast dtype of ``mode``: ``auto`` is bf16 on CUDA and none elsewhere; ``off`` is none.
    An unknown mode is a ConfigError naming the setting ``where`` (e.g. ``train.amp``)."""
    if mode == "auto":
        return torch.bfloat16 if device.type == "cuda" else None
    if mode not in AMP_DTYPES:
        raise ConfigError(f"{where}: unknown mode {mode!r} (choose from auto, {', '.join(AMP_DTYPES)})")
    return AMP_DTYPES[mode]


def autocast(dtype: torch.dtype | None, device: torch.device) -> contextlib.AbstractContextManager:
    """``torch.autocast`` to ``dtype`` on ``device``'s type, or a no-op context when ``dtype`` is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)
