"""Training losses: label-smoothed cross-entropy and named, weighted auxiliary losses.

The trainer computes ``CE + Σ_k weight_k · aux_k`` and logs every term by name; a method declares its
auxiliary losses as :class:`AuxLoss` objects and never touches the trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ordo.batch import PAD_ID, Batch
from ordo.models.outputs import Seq2SeqOutput


def label_smoothed_nll(
    logits: torch.Tensor, targets: torch.Tensor, epsilon: float, ignore_index: int = PAD_ID
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed label-smoothed cross-entropy (Szegedy et al. 2016) and summed NLL over non-pad targets.

    loss = (1 - ε) · NLL(y) + ε · mean_v(-log p_v), the form fairseq uses.

    Shape:
        logits: (N, V) or (B, T, V); targets: matching (N,) or (B, T).

    Returns:
        (loss_sum, nll_sum), both scalars in float32.
    """
    lprobs = F.log_softmax(logits.float(), dim=-1).view(-1, logits.size(-1))  # (N, V)
    targets = targets.reshape(-1)  # (N,)
    keep = targets.ne(ignore_index)
    nll = -lprobs.gather(1, targets.unsqueeze(1)).squeeze(1)  # (N,)
    smooth = -lprobs.mean(dim=-1)  # (N,)
    nll_sum = nll.masked_fill(~keep, 0.0).sum()
    smooth_sum = smooth.masked_fill(~keep, 0.0).sum()
    return (1.0 - epsilon) * nll_sum + epsilon * smooth_sum, nll_sum


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
