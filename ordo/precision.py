"""Mixed precision: the autocast dtype a ``train.amp`` / ``decode.amp`` setting names, and its context."""

from __future__ import annotations

import contextlib

import torch

from ordo import gemm

AMP_DTYPES: dict[str, torch.dtype | None] = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})  # /proc/cpuinfo flags of bf16 dot-product instructions


def native_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512_BF16 or AMX-BF16 among its flags), which oneDNN's bf16
    products use; without them bf16 is emulated, and slower than float32."""
    return bool(NATIVE_BF16_FLAGS & gemm.cpu_flags())


def amp_dtype(mode: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of ``mode`` (a ``train.amp`` / ``decode.amp`` value, checked when the config was
    built): ``auto`` is bf16 on CUDA and on a CPU with native bf16 (:func:`native_bf16`), none elsewhere; ``off``
    is none.

    Where measured, bf16 training ran 1.4-1.8x as fast as float32 on its faster backend: on an AMD EPYC (Zen 5)
    at the tiny, small and base presets, on an Intel Xeon with AMX at the small one; 2,500 updates of the
    Multi30k recipe scored 38.23 on test2016 in bf16 and 38.28 in float32
    (``bench/results/time_to_quality_m30k_bf16.md``, ``bench/results/time_to_quality_m30k_fp32.md``)."""
    if mode == "auto":
        native = device.type == "cuda" or (device.type == "cpu" and native_bf16())
        return torch.bfloat16 if native else None
    return AMP_DTYPES[mode]


def describe(mode: str, device: torch.device, cpu_gemm: str = "auto") -> str:
    """The precision ``mode`` (a ``train.amp`` / ``decode.amp`` value) gives on ``device``, and why, in words for
    a run's log: e.g. ``bf16 autocast (amp auto: native bf16 on this CPU)``; in float32 on a CPU, also where the
    linear layers' products run (``cpu_gemm``, :mod:`ordo.gemm`)."""
    dtype = amp_dtype(mode, device)
    name = "float32" if dtype is None else f"{next(key for key, value in AMP_DTYPES.items() if value == dtype)} autocast"
    if mode != "auto":
        why = f"amp {mode}"
    elif device.type == "cpu":
        why = f"amp auto: {'native' if native_bf16() else 'no native'} bf16 on this CPU"
    else:
        why = f"amp auto on {device.type}"
    reason = f": {gemm.auto_reason()}" if cpu_gemm == "auto" else ""
    products = f"; float32 products on {gemm.resolve(cpu_gemm)} (cpu_gemm {cpu_gemm}{reason})"
    return f"{name} ({why}){products if dtype is None and device.type == 'cpu' else ''}"


def autocast(dtype: torch.dtype | None, device: torch.device) -> contextlib.AbstractContextManager:
    """``torch.autocast`` to ``dtype`` on ``device``'s type, or a no-op context when ``dtype`` is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)
