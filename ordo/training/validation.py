"""Training's validation: the dev set's loss and BLEU, the processes sharing the work (each computes every N-th
batch and translates every N-th sentence; the figures are alike on every process), and whether a validation beats
the best so far (``train.best_metric``, the patience count)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ordo.config import ExperimentConfig
from ordo.data.batch import Batch
from ordo.data.batching import epoch_batches
from ordo.data.corpus import DataMeta, ParallelData
from ordo.data.textio import read_lines
from ordo.data.vocab import Vocab
from ordo.decoding.translator import translate_rows
from ordo.evaluation.bleu import sacrebleu_bleu
from ordo.losses import output_nll
from ordo.training.distributed import DistributedContext
from ordo.training.progress import Progress

logger = logging.getLogger("ordo.train")


@dataclass
class ValidResult:
    """Figures of one validation."""

    loss: float  # mean NLL per target token (no label smoothing)
    bleu: float | None = None
    extras: dict[str, float] = field(default_factory=dict)

    @property
    def ppl(self) -> float:
        """Perplexity exp(loss)."""
        return math.exp(min(self.loss, 50.0))


class Validator:
    """Validates ``model`` on the dev set of ``data_dir`` (none when it has no ``valid`` split), whose target
    vocabulary ``meta`` names, under the ``train`` and ``decode`` settings of ``cfg``; ``fields`` are the
    per-token fields the methods need, ``make_batch`` collates dev rows onto the device and ``autocast`` is the
    trainer's compute context."""

    def __init__(
        self,
        model: nn.Module,
        cfg: ExperimentConfig,
        data_dir: Path,
        meta: DataMeta,
        fields: tuple[str, ...],
        dist: DistributedContext,
        make_batch: Callable[[ParallelData, np.ndarray], Batch],
        autocast: Callable[[], contextlib.AbstractContextManager[None]],
    ) -> None:
        self.model = model
        self.cfg = cfg
        self.tcfg = cfg.train
        self.fields = fields
        self.dist = dist
        self.make_batch = make_batch
        self.autocast = autocast
        self.valid_data = ParallelData.open(data_dir, "valid") if (data_dir / "valid.src.idx").exists() else None
        self.valid_refs = read_lines(data_dir / "valid.tgt.txt") if self.valid_data is not None else []
        self.tgt_vocab = Vocab.load(data_dir / meta.tgt_vocab)

    @torch.inference_mode()
    def valid_loss(self) -> float:
        """Mean NLL per target token on the dev set (teacher forcing, no label smoothing); each process computes
        every N-th batch of it and the sums are added up."""
        assert self.valid_data is not None
        self.model.eval()
        nll, tokens = 0.0, 0
        lengths = (self.valid_data.src.lengths, self.valid_data.tgt.lengths)
        batches = list(epoch_batches(*lengths, self.tcfg.max_tokens, 0, 0, shuffle=False))
        for indices in batches[self.dist.rank::self.dist.world_size]:
            batch = self.make_batch(self.valid_data, indices)
            assert batch.tgt_out is not None
            with self.autocast():
                output = self.model(batch)
                nll += float(output_nll(output.hidden, output.project, batch.tgt_out, 0.0)[1])
            tokens += batch.num_tgt_tokens
        return self.dist.all_reduce_sum(nll) / max(self.dist.all_reduce_sum(tokens), 1)

    def valid_bleu(self) -> float:
        """sacreBLEU of greedy (or ``valid_beam``) translations of the dev set against its raw references (its
        warning about tokenized text off: the corpus is what it is, and it would repeat at every validation); each
        process translates every N-th sentence and the translations are gathered in the dev set's order."""
        assert self.valid_data is not None
        count = len(self.valid_data)
        if self.tcfg.valid_max_sentences > 0:
            count = min(count, self.tcfg.valid_max_sentences)
        share = range(self.dist.rank, count, self.dist.world_size)
        rows = [self.valid_data.src[i] for i in share]
        fields = {name: [self.valid_data.fields[name][i] for i in share] for name in self.fields}
        decode = dataclasses.replace(self.cfg.decode, beam_size=self.tcfg.valid_beam, nbest=1)
        with self.autocast():
            hyps = translate_rows(self.model, rows, decode, self.dist.device, fields)
        shares = self.dist.all_gather_object([self.tgt_vocab.decode(h[0].tokens) for h in hyps])
        texts = [shares[i % self.dist.world_size][i // self.dist.world_size] for i in range(count)]
        return sacrebleu_bleu(texts, self.valid_refs[:count], warn_tokenized=False)

    def validate(self, step: int) -> ValidResult | None:
        """Dev loss and BLEU, the processes sharing the work (alike on every process), logged as those of update
        ``step``; None when there is no dev set."""
        if self.valid_data is None:
            return None
        result = ValidResult(self.valid_loss())
        if self.tcfg.valid_bleu:
            result.bleu = self.valid_bleu()
        bleu = "" if result.bleu is None else f" | bleu {result.bleu:.2f}"
        logger.info("valid | update %d | loss %.3f | ppl %.2f%s", step, result.loss, result.ppl, bleu)
        return result

    def is_improvement(self, valid: ValidResult | None, progress: Progress) -> bool:
        """Whether ``valid`` beats the best so far in ``progress`` (higher BLEU or lower loss); updates its
        patience count.

        A run resumed with another figure than its best was measured by (``train.best_metric``, or
        ``train.valid_bleu`` turned off) starts its best and patience afresh from this validation, rather than
        comparing a loss with a BLEU score."""
        if valid is None:
            return False
        metric = "bleu" if self.tcfg.best_metric == "bleu" and valid.bleu is not None else "loss"
        score = valid.bleu if metric == "bleu" else -valid.loss
        assert score is not None
        if progress.best is not None and progress.best_metric not in ("", metric):
            logger.warning("the best checkpoint so far was chosen by %s, validations now score by %s: best.pt and "
                           "the patience count start again from this one", progress.best_metric, metric)
            progress.best = None
        progress.best_metric = metric
        if progress.best is None or score > progress.best:
            progress.best = score
            progress.bad_validations = 0
            return True
        progress.bad_validations += 1
        return False
