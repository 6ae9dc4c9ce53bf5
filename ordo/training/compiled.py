"""The training forward pass and its losses, eager or compiled by ``torch.compile`` (``train.compile``).

A training step on a GPU is bound less by its matrix products than by the kernels around them, each launched
from Python: layer norms, dropout, residual sums, the softmax passes of the loss (docs/performance.md, "On a
GPU"). Compiled, the forward pass and the losses become one graph, whose compiler (inductor) fuses those
element-wise kernels and writes the backward pass as fused kernels too; ``reduce-overhead`` also replays the
launches as CUDA graphs. Two things change in the compiled graph, neither what it computes:

- the output layer's loss is :func:`ordo.losses.dense_output_nll`, whose softmax passes the compiler fuses,
  in place of the chunked :func:`ordo.losses.output_nll`, whose gradients are computed in Python loops;
- token packing (:class:`ordo.models.packing.TokenPacking`) is off: whether to pack reads the batch's padding
  on the host, a data-dependent choice that would split the graph.

Shapes are dynamic (token batches bring new lengths at every step; ``dynamic=True`` compiles one graph for
them rather than one per shape). On CUDA the compiler also specialises its kernels on whether a length is a
multiple of 8, so a compiled run pads each batch's lengths to a multiple of 8 unless ``train.pad_multiple``
says otherwise (:func:`batch_pad_multiple`): one graph, not two, each of which took about 100 s to compile for
the base preset on an H100 machine. Dropout draws from the compiler's own random streams, seeded from torch's
generators, so a compiled run is deterministic and resumes exactly, but its dropout masks differ from an eager
run's. Validation and translation run the eager model.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ordo.config import CompileMode
from ordo.data.batch import Batch
from ordo.losses import AuxLoss, dense_output_nll, output_nll

COMPILED_PAD_MULTIPLE = 8  # lengths aligned so that inductor's CUDA kernels need one graph (module docstring)

# (summed label-smoothed loss, summed NLL, each auxiliary loss's mean) of one batch
ForwardLosses = Callable[[Batch], tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]]


def forward_losses(model: nn.Module, losses: list[AuxLoss], epsilon: float, mode: CompileMode = "off") -> ForwardLosses:
    """The function from a batch to its losses through ``model`` (label smoothing ``epsilon``): the output
    layer's summed loss and NLL (:func:`ordo.losses.output_nll`; in a compiled graph its whole-tensor form
    :func:`ordo.losses.dense_output_nll`) and the mean of each auxiliary loss; compiled with ``torch.compile`` in
    ``mode`` unless it is ``off`` (module docstring)."""
    output_loss = output_nll if mode == "off" else dense_output_nll

    def step(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """Forward pass and losses of one batch."""
        assert batch.tgt_out is not None
        output = model(batch)
        loss_sum, nll_sum = output_loss(output.hidden, output.project, batch.tgt_out, epsilon)
        return loss_sum, nll_sum, [aux.compute(output, batch).float() for aux in losses]

    if mode == "off":
        return step
    without_packing(model)
    return torch.compile(step, mode=None if mode == "default" else mode, dynamic=True)  # type: ignore[return-value]


def batch_pad_multiple(pad_multiple: int, mode: CompileMode) -> int:
    """The multiple each training batch's lengths are padded to: ``train.pad_multiple`` where set (>= 1), else
    8 for a compiled step and 1 (no padding beyond the longest row) for an eager one (module docstring)."""
    if pad_multiple:
        return pad_multiple
    return 1 if mode == "off" else COMPILED_PAD_MULTIPLE


def without_packing(model: nn.Module) -> None:
    """Turn token packing off in every encoder of ``model`` (module docstring)."""
    for module in model.modules():
        if hasattr(module, "pack_below"):
            setattr(module, "pack_below", 0.0)  # noqa: B010 (an attribute of some encoders only)
