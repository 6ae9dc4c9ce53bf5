"""Process-group set-up for ``torchrun`` (DistributedDataParallel: gloo on CPU, NCCL on CUDA).

Without ``WORLD_SIZE`` in the environment everything here is a single-process no-op.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import torch
import torch.distributed as torch_dist
from torch import nn

from ordo.device import resolve_device
from ordo.errors import ConfigError, OrdoError

T = TypeVar("T")


class DistributedContext:
    """Rank, world size and device of this process, and the few collective operations training needs."""

    def __init__(self, device: str = "auto") -> None:
        """Join torchrun's process group (when ``WORLD_SIZE`` > 1) on ``device`` (``train.device``).

        Raises:
            ConfigError: when ``device`` names one GPU (``cuda:N``) of several for several processes.
        """
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        if self.world_size > 1 and device.startswith("cuda:") and torch.cuda.device_count() > 1:
            raise ConfigError(f"train.device {device}: torchrun started {self.world_size} processes, which would all "
                              "train on that one GPU; use cuda or auto (each process takes its own GPU, LOCAL_RANK) "
                              "and choose the GPUs with CUDA_VISIBLE_DEVICES")
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

    def close(self) -> None:
        """Tear the process group down, once every process is past its last collective operation (a process
        that exits without it may abort in gloo's threads)."""
        if torch_dist.is_initialized():
            torch_dist.destroy_process_group()

    def all_reduce_max(self, value: int) -> int:
        """Largest ``value`` over all processes (how they agree on a decision any one of them may take)."""
        if self.world_size == 1:
            return value
        tensor = torch.tensor([value], dtype=torch.int64, device=self.device)
        torch_dist.all_reduce(tensor, op=torch_dist.ReduceOp.MAX)
        return int(tensor.item())

    def broadcast_object(self, value: Any) -> Any:
        """Rank 0's ``value`` (picklable), on every process."""
        if self.world_size == 1:
            return value
        box = [value]
        torch_dist.broadcast_object_list(box, src=0)
        return box[0]

    def on_main(self, action: Callable[[], T]) -> T | None:
        """``action()`` on rank 0 alone (None on the other processes), every process calling it at the same point.

        An OrdoError that ``action`` raises there (the run directory locked by another training, a checkpoint that
        cannot be saved) is raised on every process, with rank 0's message: none is left waiting for rank 0 in its
        next collective operation, up to torchrun's or NCCL's timeout, and each machine's log says why the run
        stopped.
        """
        result: T | None = None
        error: OrdoError | None = None
        if self.is_main:
            try:
                result = action()
            except OrdoError as err:
                error = err
        error = self.broadcast_object(error)
        if error is not None:
            raise error
        return result

    def all_gather_object(self, value: Any) -> list[Any]:
        """Every process's ``value`` (picklable), by rank."""
        if self.world_size == 1:
            return [value]
        values: list[Any] = [None] * self.world_size
        torch_dist.all_gather_object(values, value)
        return values


def is_torchrun_worker() -> bool:
    """Whether this process is one of several that ``torchrun`` started (``WORLD_SIZE`` > 1)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def exit_worker(code: int) -> NoReturn:
    """End a ``torchrun`` worker with ``code`` without finalizing the interpreter.

    Gloo's worker threads outlive ``destroy_process_group`` and drop their last collective's tensors when they
    get the CPU again; a tensor made in Python needs the GIL to be freed, and a thread that asks for the GIL
    while the interpreter is finalizing aborts the process (SIGABRT, "terminate called without an active
    exception"), which fails the whole ``torchrun`` job after a finished run. Logs and standard streams are
    flushed first; checkpoints and outputs were written (and fsynced) before this point.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
