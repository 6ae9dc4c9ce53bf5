"""Training losses: label-smoothed cross-entropy and named, weighted auxiliary losses.

The trainer computes ``CE + Σ_k weight_k · aux_k`` and logs every term by name; a method declares its
auxiliary losses as :class:`AuxLoss` objects and never touches the trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ordo import gemm
from ordo.data.batch import PAD_ID, Batch
from ordo.models.outputs import Seq2SeqOutput

CHUNK_ELEMENTS = 1 << 22  # logits per chunk on the CPU (16 MB in float32, near the caches): 2**22 // V rows
GPU_CHUNK_ELEMENTS = 1 << 27  # on a GPU (512 MB in float32): a few large matmuls rather than many small launches


def output_nll(
    hidden: torch.Tensor, project: nn.Module, targets: torch.Tensor, epsilon: float, ignore_index: int = PAD_ID,
    chunk_rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed label-smoothed cross-entropy (Szegedy et al. 2016) of the output layer, and summed NLL, over the
    non-pad targets, without the (N, V) logits in memory.

    With logits z = h W^T (+ b) from ``project`` (its ``weight`` and optional ``bias``) and lse = log Σ_v exp(z_v):
    loss = (1 - ε) · NLL(y) + ε · mean_v(-log p_v) (fairseq's form), NLL(y) = lse - z_y, mean_v(-log p_v) =
    lse - mean_v z_v. Rows whose target is ``ignore_index`` are dropped before the projection; the others go
    through in chunks of ``chunk_rows`` (default CHUNK_ELEMENTS // V on the CPU, GPU_CHUNK_ELEMENTS // V
    elsewhere), and each chunk's gradient
    d loss / d z = p - (1 - ε) · onehot(y) - ε / V is pushed through the projection at once, so only one chunk
    of logits ever exists. Under autocast the matmuls run in the autocast dtype and the softmax in float32; in bf16
    training on a CPU, and in float32 training whose products run on oneDNN, the rows are padded to
    :func:`ordo.gemm.bucketed_rows` and the chunks are multiples of :data:`ordo.gemm.ROW_BUCKET` (so the products
    see a bounded set of shapes, :mod:`ordo.gemm`), the padded rows masked out.

    Shape:
        hidden: (..., D); targets: the matching (...).

    Returns:
        (loss_sum, nll_sum), float32 scalars; only loss_sum is differentiable (nll_sum is for logging).
    """
    flat_targets = targets.reshape(-1)
    keep = flat_targets.ne(ignore_index)
    rows = hidden.reshape(-1, hidden.size(-1))[keep]  # (N, D)
    weight: torch.Tensor = project.weight  # type: ignore[assignment]
    bias: torch.Tensor | None = getattr(project, "bias", None)
    with_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (rows, weight, bias))
    elements = CHUNK_ELEMENTS if rows.device.type == "cpu" else GPU_CHUNK_ELEMENTS
    chunk = chunk_rows or max(1, elements // weight.size(0))
    return _ChunkedOutputNLL.apply(rows, weight, bias, flat_targets[keep], epsilon, chunk, with_grad)  # type: ignore[no-any-return]


def dense_output_nll(
    hidden: torch.Tensor, project: nn.Module, targets: torch.Tensor, epsilon: float, ignore_index: int = PAD_ID,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`output_nll`'s loss written over whole tensors, for a compiled training step (``train.compile``,
    :mod:`ordo.training.compiled`).

    The same terms: loss = (1 - ε) · NLL(y) + ε · (lse - mean_v z_v), NLL(y) = lse - z_y, summed over the
    positions whose target is not ``ignore_index``. The padded positions are masked rather than dropped, so the
    shapes follow the batch's and not its content; the compiler fuses the float32 softmax passes over the
    (…, V) logits into a few kernels (eagerly, this form would hold all the logits in float32: use
    :func:`output_nll` there). The products run in the autocast dtype where autocast is on.

    Shape:
        hidden: (..., D); targets: the matching (...).

    Returns:
        (loss_sum, nll_sum), float32 scalars; only loss_sum is differentiable.
    """
    bias: torch.Tensor | None = getattr(project, "bias", None)
    logits = F.linear(hidden, project.weight, bias).float()  # type: ignore[arg-type]  # (..., V)
    lse = torch.logsumexp(logits, dim=-1)
    keep = targets.ne(ignore_index)
    target_logits = logits.gather(-1, targets.masked_fill(~keep, 0).unsqueeze(-1)).squeeze(-1)
    zero = lse.new_zeros(())
    nll = torch.where(keep, lse - target_logits, zero).sum()
    smoothing = torch.where(keep, lse - logits.mean(dim=-1), zero).sum()
    return (1.0 - epsilon) * nll + epsilon * smoothing, nll.detach()


class _ChunkedOutputNLL(torch.autograd.Function):
    """:func:`output_nll` on packed rows; the gradients are computed in the forward pass and scaled in backward."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
        targets: torch.Tensor, epsilon: float, chunk: int, with_grad: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, D) rows, (V, D) weight, (V,) bias or None, (N,) targets -> summed loss and summed NLL."""
        device = rows.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else rows.dtype
        vocab = weight.size(0)
        x, w = rows.to(dtype), weight.to(dtype)
        b = None if bias is None else bias.to(dtype)
        real_rows = rows.size(0)
        if with_grad and gemm.pads_training_rows(rows, weight, dtype):
            chunk = max(gemm.ROW_BUCKET, chunk // gemm.ROW_BUCKET * gemm.ROW_BUCKET)
            padding = gemm.bucketed_rows(real_rows) - real_rows
            x, targets = F.pad(x, (0, 0, 0, padding)), F.pad(targets, (0, padding))  # padded rows: masked below
        loss_sum, nll_sum = (torch.zeros((), dtype=torch.float32, device=rows.device) for _ in range(2))
        grads = _OutputGrads(rows, weight, bias, x.size(0)) if with_grad else None
        with torch.autocast(device, enabled=False):
            for start in range(0, x.size(0), chunk):
                part, part_targets = x[start:start + chunk], targets[start:start + chunk].unsqueeze(1)
                kept = min(part.size(0), real_rows - start)  # the chunk's rows that are not padding
                logits = gemm.linear(part, w, b).float()  # (c, V)
                target_logits = logits.gather(1, part_targets).squeeze(1)  # (c,)
                mean_logits = logits.mean(dim=1)
                row_max = logits.amax(dim=1, keepdim=True)
                probs = logits.sub_(row_max).exp_()  # exp(z - max), in place
                exp_sum = probs.sum(dim=1)
                lse = row_max.squeeze(1) + exp_sum.log()
                nll = (lse - target_logits)[:kept].sum()
                loss_sum += (1.0 - epsilon) * nll + epsilon * (lse - mean_logits)[:kept].sum()
                nll_sum += nll
                if grads is not None:
                    probs.div_(exp_sum.unsqueeze(1)).sub_(epsilon / vocab)
                    probs.scatter_add_(1, part_targets, probs.new_full(part_targets.shape, epsilon - 1.0))
                    probs[kept:] = 0.0  # padded rows: no gradient
                    grads.add(start, probs.to(dtype), part, w)
        ctx.grads = grads  # type: ignore[attr-defined]
        ctx.mark_non_differentiable(nll_sum)
        return loss_sum, nll_sum

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad_loss: torch.Tensor | None, _grad_nll: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, ...]:
        """The forward pass's gradients times the incoming gradient of the loss."""
        grads: _OutputGrads | None = ctx.grads  # type: ignore[attr-defined]
        if grads is None:
            raise RuntimeError("output_nll: no gradient was computed (grad mode off) or a second backward (retain_graph)")
        ctx.grads = None  # type: ignore[attr-defined]
        scale = grad_loss if grad_loss is not None else torch.zeros(())
        return (*grads.scaled(scale), None, None, None, None)


class _OutputGrads:
    """Gradients of the summed loss for the rows, weight and bias of :class:`_ChunkedOutputNLL`, chunk by chunk."""

    def __init__(self, rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padded_rows: int) -> None:
        """Gradients for the (N, D) ``rows``, whose chunks run over ``padded_rows`` >= N rows (the padded ones
        masked)."""
        self.rows = rows.new_empty((padded_rows, rows.size(1)))
        self.real_rows = rows.size(0)
        self.weight = torch.zeros_like(weight, dtype=torch.float32)
        self.bias = None if bias is None else torch.zeros_like(bias, dtype=torch.float32)
        self.dtypes = (rows.dtype, weight.dtype, None if bias is None else bias.dtype)

    def add(self, start: int, grad_logits: torch.Tensor, part: torch.Tensor, weight: torch.Tensor) -> None:
        """Push one chunk's (c, V) d loss / d z back through z = x W^T + b."""
        self.rows[start:start + part.size(0)] = gemm.matmul(grad_logits, weight)
        self.weight += gemm.matmul(grad_logits.t(), part).float()
        if self.bias is not None:
            self.bias += grad_logits.sum(dim=0).float()

    def scaled(self, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(rows, weight, bias) gradients times ``scale``, in their parameters' dtypes."""
        rows_dtype, weight_dtype, bias_dtype = self.dtypes
        bias = None if self.bias is None else (self.bias * scale).to(bias_dtype)
        rows = self.rows[: self.real_rows] * scale
        return rows.to(rows_dtype), (self.weight * scale).to(weight_dtype), bias


@dataclass
class AuxLoss:
    """A named auxiliary loss: ``compute(output, batch)`` returns its mean value, a scalar tensor.

    Attributes:
        name: the key it is logged under, e.g. ``exgre_cos``.
        weight: λ in ``CE + λ · aux``.
        compute: reads named outputs (``output.extras``) and batch fields.
    """

    name: str
    weight: float
    compute: Callable[[Seq2SeqOutput, Batch], torch.Tensor]
