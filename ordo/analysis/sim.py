"""Sim (paper 000, Eq. 12): how close the learned reordering encodings come to the target order.

``Sim(PR^N, RE)`` is the mean cosine between ExGRE's last-layer encodings pr_j^N and re_j = PE(r_j) over the
real source pieces of a test set (r_j from alignments of the test pairs); ``Sim(PE, RE)`` compares the
plain positions PE(j) with RE in the same way (the paper's Figure 5 baseline).

Beside them, the share of pieces whose last-layer predicted position b_j^N lies under 0.5, before the first
position: under the hard window (paper 000 §4.1) no position falls within ±D of such a b, so pr_j^N = 0 and
the piece gets no reordering at all (under the paper's Eq. 6 sum only the small tail of the Gaussian over
position 1). A model that the translation loss alone drives there has switched ExGRE off.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ordo.api import load_run, run_data_meta
from ordo.data.batching import collate, epoch_batches
from ordo.data.corpus import ParallelData
from ordo.data.shards import vocab_digest
from ordo.errors import InputError
from ordo.methods.exgre import FIELD, PR_NAME, PREDICTED_NAME
from ordo.models.embeddings import sinusoidal_table


@dataclass
class SimResult:
    """Mean cosines over the pieces of a split."""

    learned: float  # Sim(PR^N, RE)
    sequential: float  # Sim(PE, RE)
    pieces: int
    before_first: float  # share of the pieces whose b_j^N < 0.5 (pr_j^N = 0 under the hard window)


@torch.inference_mode()
def reordering_similarity(run_dir: Path, data_dir: Path, split: str = "test", checkpoint: str = "best",
                          device: str = "auto", max_tokens: int = 4000) -> SimResult:
    """Sim of an ExGRE/ReFSR run on ``split`` of a data directory prepared with ``reorder_positions``.

    Raises:
        InputError: when the data's vocabulary is not the run's, the split has no ``reorder_positions`` field or
            the run leaves no pr^N.
    """
    data = ParallelData.open(data_dir, split)
    run = load_run(run_dir, checkpoint, device)
    if vocab_digest(run_dir, run_data_meta(run_dir)) != vocab_digest(data_dir, data.meta):
        raise InputError(f"{data_dir}: its vocabulary differs from the one run {run_dir} was trained with; give "
                         "the data directory the run was trained on")
    if FIELD not in data.fields:
        raise InputError(f"{data_dir}: split {split!r} has no {FIELD} field (prepare with reorder_positions: true)")
    table = sinusoidal_table(int(data.src.lengths.max()) + 2, run.cfg.model.d_model).to(run.device)
    learned_sum = sequential_sum = 0.0
    pieces = before_first = 0
    for indices in epoch_batches(data.src.lengths, None, max_tokens, 0, 0, shuffle=False):
        rows = [data.src[i] for i in indices]
        batch = collate(indices, rows, field_rows={FIELD: [data.fields[FIELD][i] for i in indices]}).to(run.device)
        extras = run.model.encode(batch).extras  # type: ignore[operator]
        if PR_NAME not in extras:
            raise InputError(f"{run_dir}: the model has no ExGRE encodings (train with exgre or refsr)")
        positions = batch.fields[FIELD]  # (B, S), 1-based, 0 at EOS/padding
        keep = positions > 0
        target = table[positions]  # (B, S, D)
        sequential = table[torch.arange(1, positions.size(1) + 1, device=positions.device)].expand_as(target)
        learned_sum += float(F.cosine_similarity(extras[PR_NAME].float(), target, dim=-1)[keep].sum())
        sequential_sum += float(F.cosine_similarity(sequential, target, dim=-1)[keep].sum())
        pieces += int(keep.sum())
        before_first += int((extras[PREDICTED_NAME] < 0.5)[keep].sum())
    return SimResult(learned_sum / max(pieces, 1), sequential_sum / max(pieces, 1), pieces,
                     before_first / max(pieces, 1))
