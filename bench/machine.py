"""The machine a figure was measured on, as every report names it: the CPU, its vector extensions and the
kernels PyTorch and ordo pick on it."""

from __future__ import annotations

import torch

VECTOR_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_bf16", "avx512_vnni", "avx_vnni",
                "amx_tile", "amx_bf16", "amx_int8")  # the /proc/cpuinfo flags that decide CPU kernels' speed


def cpu_description() -> str:
    """The CPU's model name and vendor, its vector extensions among :data:`VECTOR_FLAGS` (from ``/proc/cpuinfo``;
    "unknown" elsewhere), the kernel level PyTorch dispatches to (``torch.backends.cpu.get_cpu_capability``) and
    where ordo's float32 linear layers multiply by default (:mod:`ordo.gemm`)."""
    from ordo.gemm import cpu_vendor, cpuinfo, resolve

    model = " ".join(cpuinfo().get("model name", "unknown CPU").split())
    flags = set(cpuinfo().get("flags", "").split())
    found = [flag for flag in VECTOR_FLAGS if flag in flags] if flags else ["unknown"]

    return f"{model} ({cpu_vendor() or 'vendor unknown'}); vector extensions: {' '.join(found) or 'none'}; " \
           f"PyTorch kernels: {torch.backends.cpu.get_cpu_capability()}; float32 linear layers (cpu_gemm auto): " \
           f"{resolve('auto')}"
