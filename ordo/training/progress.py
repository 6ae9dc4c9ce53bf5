"""Where a training run stands (:class:`Progress`): the update count, the place in the epoch's batches, the best
validation so far and the running totals; the trainer saves it in every checkpoint and a resumed run reads it
back, the batch stream (:mod:`ordo.training.batches`) and validation (:mod:`ordo.training.validation`) keeping
their parts of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""

    step: int = 0  # updates done
    epoch: int = 1  # current epoch (1-based)
    position: int = 0  # index of the next batch within the epoch's batch list
    shard: str = ""  # the data directory whose training split the current epoch reads (ordo.data.shards)
    best: float | None = None  # best validation figure so far (see train.best_metric)
    best_metric: str = ""  # which figure ``best`` is: "bleu" or "loss" ("" in checkpoints saved before it was kept)
    bad_validations: int = 0  # validations since the best one
    train_seconds: float = 0.0  # wall time spent training, over all resumptions
    src_tokens: int = 0  # source tokens (EOS included) this process has trained on, over all resumptions
    tgt_tokens: int = 0  # target tokens likewise
    data_fingerprint: dict[str, dict[str, Any]] = field(default_factory=dict)  # the shard's training split (rank 0)
