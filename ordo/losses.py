"""Training losses: label-smoothed cross-entropy and named, weighted auxiliary losses.

The trainer computes ``CE + Σ_k weight_k · aux_k`` and logs every term by name; a method declares its
auxiliary losses as :class:`AuxLoss` objects and never touches the trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ordo.batch import PAD_ID, Batch
from ordo.models.outputs import Seq2SeqOutput


def label_smoothed_nll(
    logits: torch.Tensor, targets: torch.Tensor, epsilon: float, ignore_index: int = PAD_ID
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed label-smoothed cross-entropy (Szegedy et al. 2016) and summed NLL over non-pad targets.

    loss = (1 - ε) · NLL(y) + ε · mean_v(-log p_v), the form fairseq uses. With lse = log Σ_v exp(z_v),
    NLL(y) = lse - z_y and mean_v(-log p_v) = lse - mean_v z_v, so the forward pass needs no (N, V)
    log-probabilities, and the gradient is written in one pass (:class:`_LabelSmoothedNLL`).

    Shape:
        logits: (N, V) or (B, T, V); targets: matching (N,) or (B, T).

    Returns:
        (loss_sum, nll_sum), both scalars in float32.
    """
    flat_logits = logits.float().reshape(-1, logits.size(-1))  # (N, V)
    return _LabelSmoothedNLL.apply(flat_logits, targets.reshape(-1), epsilon, ignore_index)  # type: ignore[no-any-return]


class _LabelSmoothedNLL(torch.autograd.Function):
    """Label-smoothed NLL with its gradient in closed form: for a kept row with softmax p and target y,

    d loss / d z = p - (1 - ε) · onehot(y) - ε / V   and   d NLL / d z = p - onehot(y).
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, logits: torch.Tensor, targets: torch.Tensor, epsilon: float,
        ignore_index: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, V) logits and (N,) targets -> summed loss and summed NLL over the rows whose target is kept."""
        keep = targets.ne(ignore_index)  # (N,)
        safe_targets = targets.masked_fill(~keep, 0)  # (N,)
        row_max = logits.amax(dim=-1, keepdim=True)  # (N, 1)
        exp_shifted = (logits - row_max).exp_()  # (N, V), becomes the gradient in backward
        exp_sum = exp_shifted.sum(dim=-1)  # (N,)
        lse = row_max.squeeze(1) + exp_sum.log()  # (N,)
        nll = (lse - logits.gather(1, safe_targets.unsqueeze(1)).squeeze(1)).masked_fill(~keep, 0.0)  # (N,)
        smooth = (lse - logits.mean(dim=-1)).masked_fill(~keep, 0.0)  # (N,)
        ctx.save_for_backward(exp_shifted, exp_sum, safe_targets, keep)
        ctx.epsilon = epsilon  # type: ignore[attr-defined]
        ctx.consumed = False  # type: ignore[attr-defined]
        nll_sum = nll.sum()
        return (1.0 - epsilon) * nll_sum + epsilon * smooth.sum(), nll_sum

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad_loss: torch.Tensor | None, grad_nll: torch.Tensor | None
    ) -> tuple[torch.Tensor, None, None, None]:
        """Gradient of ``grad_loss · loss + grad_nll · NLL`` with respect to the logits, (N, V).

        Written in place over the saved exp(z - max), in two passes: p · (g_loss + g_nll) - ε g_loss / V on kept rows
        (zero on the others), then the target column.
        """
        if ctx.consumed:  # type: ignore[attr-defined]
            raise RuntimeError("label_smoothed_nll: a second backward through one loss (retain_graph) is not supported")
        ctx.consumed = True  # type: ignore[attr-defined]
        exp_shifted, exp_sum, targets, keep = ctx.saved_tensors  # type: ignore[attr-defined]
        epsilon: float = ctx.epsilon  # type: ignore[attr-defined]
        g_loss = grad_loss if grad_loss is not None else exp_sum.new_zeros(())
        g_nll = grad_nll if grad_nll is not None else exp_sum.new_zeros(())
        kept = keep.to(exp_sum.dtype).unsqueeze(1)  # (N, 1)
        grad = exp_shifted.mul_(kept * (g_loss + g_nll) / exp_sum.unsqueeze(1))  # softmax · scale, (N, V)
        grad.sub_(kept * (g_loss * epsilon / exp_shifted.size(1)))
        target_grad = -kept * ((1.0 - epsilon) * g_loss + g_nll)  # (N, 1)
        return grad.scatter_add_(1, targets.unsqueeze(1), target_grad), None, None, None


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
