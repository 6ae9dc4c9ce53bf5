"""Mixed precision: the autocast dtype a ``train.amp`` / ``decode.amp`` setting names, and its context."""

from __future__ import annotations

import contextlib

import torch

AMP_DTYPES: dict[str, torch.dtype | None] = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def amp_dtype(mode: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of ``mode`` (a ``train.amp`` / ``decode.amp`` value, checked when the config was
    built): ``auto`` is bf16 on CUDA and none elsewhere; ``off`` is none."""
    if mode == "auto":
        return torch.bfloat16 if device.type == "cuda" else None
    return AMP_DTYPES[mode]


def autocast(dtype: torch.dtype | None, device: torch.device) -> contextlib.AbstractContextManager:
    """``torch.autocast`` to ``dtype`` on ``device``'s type, or a no-op context when ``dtype`` is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)
