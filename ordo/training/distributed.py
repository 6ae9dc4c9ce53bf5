"""Process-group set-up for ``torchrun`` (DistributedDataParallel: gloo on CPU, NCCL on CUDA).

Without ``WORLD_SIZE`` in the environment everything here is a single-process no-op.
"""

from __future__ import annotations

import contextlib
import os

import torch
import torch.distributed as torch_dist
from torch import nn


def resolve_device(setting: str, local_rank: int = 0) -> torch.device:
    """``auto`` picks CUDA (this process's local GPU) when available, else the CPU."""
    if setting == "auto":
        setting = "cuda" if torch.cuda.is_available() else "cpu"
    if setting == "cuda":
        return torch.device("cuda", local_rank)
    return torch.device(setting)


class DistributedContext:
    """Rank, world size and device of this process, and the few collective operations training needs."""

    def __init__(self, device: str = "auto") -> None:
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.device = resolve_device(device, local_rank)
        if self.world_size > 1 and not torch_dist.is_initialized():
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            if self.device.type == "cuda":
                torch.cuda.set_device(self.device)
            torch_dist.init_process_group(backend)

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0 (which writes checkpoints and logs)."""
        return self.rank == 0

    def wrap(self, model: nn.Module) -> nn.Module:
        """``model`` in DistributedDataParallel when there is more than one process."""
        if self.world_size == 1:
            return model
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=False)

    def no_sync(self, wrapped: nn.Module, sync: bool) -> contextlib.AbstractContextManager:
        """Skip the gradient all-reduce for accumulation steps other than the last."""
        if sync or self.world_size == 1:
            return contextlib.nullcontext()
        return wrapped.no_sync()  # type: ignore[operator]

    def all_reduce_sum(self, value: float) -> float:
        """Sum of ``value`` over all processes."""
        if self.world_size == 1:
            return value
        tensor = torch.tensor([value], dtype=torch.float64, device=self.device)
        torch_dist.all_reduce(tensor)
        return float(tensor.item())
