"""The training loop: token batches, accumulation, clipping, validation, checkpoints, resume (SPEC §0).

Resuming is exact: a checkpoint stores the model, the optimiser, the update count, the RNG states and the
data position (epoch and batch within it); the batch list of an epoch is rebuilt from the seed, so a run
that is interrupted and resumed ends with the same parameters as one that is not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from ordo.config import ExperimentConfig, to_dict
from ordo.data.batch import Batch
from ordo.data.batching import collate, epoch_batches
from ordo.data.corpus import ParallelData
from ordo.data.textio import read_lines
from ordo.data.vocab import Vocab
from ordo.decoding.translator import translate_rows
from ordo.errors import CheckpointError
from ordo.evaluation.bleu import corpus_scores
from ordo.gemm import cpu_gemm
from ordo.losses import AuxLoss, output_nll
from ordo.precision import amp_dtype, autocast
from ordo.training.checkpoint import (
    BEST_NAME,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
    step_checkpoints,
)
from ordo.training.distributed import DistributedContext
from ordo.training.optim import build_optimizer, inverse_sqrt_lr, set_lr

logger = logging.getLogger("ordo.train")


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""

    step: int = 0  # updates done
    epoch: int = 1  # current epoch (1-based)
    position: int = 0  # index of the next batch within the epoch's batch list
    best: float | None = None  # best validation figure so far (see train.best_metric)
    bad_validations: int = 0  # validations since the best one
    train_seconds: float = 0.0  # wall time spent training, over all resumptions
    src_tokens: int = 0  # source tokens (EOS included) this process has trained on, over all resumptions
    tgt_tokens: int = 0  # target tokens likewise


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


class Trainer:
    """Trains ``model`` on a prepared data directory and writes checkpoints into ``run_dir/checkpoints``."""

    def __init__(
        self,
        model: nn.Module,
        cfg: ExperimentConfig,
        run_dir: Path,
        losses: list[AuxLoss] | None = None,
        fields: tuple[str, ...] = (),
        dist: DistributedContext | None = None,
    ) -> None:
        self.cfg = cfg
        self.tcfg = cfg.train
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.dist = dist or DistributedContext(cfg.train.device)
        self.device = self.dist.device
        self.model = model.to(self.device)
        self.wrapped = self.dist.wrap(self.model)
        self.losses = losses or []
        self.fields = fields
        self.optimizer = build_optimizer(self.model, self.tcfg)
        self.amp = amp_dtype(self.tcfg.amp, self.device)
        self.scaler = torch.amp.GradScaler(enabled=self.amp == torch.float16)
        data_dir = Path(cfg.data)
        self.train_data = ParallelData.open(data_dir, "train")
        self.valid_data = ParallelData.open(data_dir, "valid") if (data_dir / "valid.src.idx").exists() else None
        self.valid_refs = read_lines(data_dir / "valid.tgt.txt") if self.valid_data is not None else []
        self.tgt_vocab = Vocab.load(data_dir / self.train_data.meta.tgt_vocab)
        self.progress = Progress()

    # -- checkpoints -------------------------------------------------------------------------------

    def state_dict(self, valid: ValidResult | None) -> dict[str, Any]:
        """Everything a resumed run needs (weights-only loadable: tensors, numbers, strings, containers)."""
        rng = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else torch.empty(0)
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "progress": vars(self.progress).copy(),
            "rng": rng,
            "config": to_dict(self.cfg),
            "valid": None if valid is None else {"loss": valid.loss, "bleu": valid.bleu},
        }

    def resume(self) -> bool:
        """Restore the newest ``step_N.pt`` of this run, if any (else apply ``train.init_from``).

        Returns whether it resumed."""
        checkpoints = step_checkpoints(self.ckpt_dir)
        if not checkpoints:
            if self.tcfg.init_from:
                self.initialise_from(Path(self.tcfg.init_from))
            return False
        state = load_checkpoint(checkpoints[-1], map_location=self.device)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        self.progress = Progress(**state["progress"])
        torch.set_rng_state(state["rng"]["torch"].cpu())
        if self.device.type == "cuda" and state["rng"].get("cuda") is not None:
            torch.cuda.set_rng_state(state["rng"]["cuda"].cpu(), self.device)
        logger.info("resumed from %s (update %d, epoch %d)", checkpoints[-1], self.progress.step, self.progress.epoch)
        return True

    def initialise_from(self, path: Path) -> None:
        """Copy the weights of another run's checkpoint into a fresh model (e.g. RNNsearch* before distortion
        training, paper 003's Table 5); parameters it lacks keep their initialisation, and the optimizer starts
        afresh."""
        weights = load_checkpoint(path, map_location=self.device)["model"]
        own = self.model.state_dict()
        mismatched = [k for k, v in weights.items() if k in own and own[k].shape != v.shape]
        if mismatched:
            raise CheckpointError(f"{path}: shapes differ from this model for {', '.join(mismatched[:5])}")
        missing, unexpected = self.model.load_state_dict(weights, strict=False)
        if unexpected:
            raise CheckpointError(f"{path}: parameters this model does not have: {', '.join(unexpected[:5])}")
        logger.info("initialised from %s; %d parameter tensors kept their own initialisation: %s", path,
                    len(missing), ", ".join(missing) or "none")

    def save(self, valid: ValidResult | None, is_best: bool) -> None:
        """Write ``step_N.pt`` (and ``best.pt``) on rank 0, then drop old periodic checkpoints."""
        if not self.dist.is_main:
            return
        state = self.state_dict(valid)
        save_checkpoint(state, self.ckpt_dir / f"step_{self.progress.step}.pt")
        if is_best:
            save_checkpoint(state, self.ckpt_dir / BEST_NAME)
        prune_checkpoints(self.ckpt_dir, self.tcfg.keep_last)

    # -- data --------------------------------------------------------------------------------------

    def make_batch(self, data: ParallelData, indices: np.ndarray) -> Batch:
        """Collate rows ``indices`` of ``data`` with the fields the methods need."""
        src = [data.src[i] for i in indices]
        tgt = [data.tgt[i] for i in indices]
        fields = {name: [data.fields[name][i] for i in indices] for name in self.fields}
        return collate(indices, src, tgt, fields).to(self.device)

    def epoch_batch_list(self, epoch: int) -> list[np.ndarray]:
        """This process's share of the epoch's batches (every world_size-th batch).

        ``train.batch_by: target`` sizes batches by their target tokens alone, so systems whose sources differ
        in length (a lattice against its 1-best segmentation) get the same target budget per update; with
        ``train.target_bucket: 0`` they see the same sentences, with N > 0 sources of alike length share a batch.
        """
        src, tgt = self.train_data.src.lengths, self.train_data.tgt.lengths
        if self.tcfg.batch_by == "target":  # epoch_batches sizes a pair by its first argument alone
            batches = epoch_batches(tgt, None, self.tcfg.max_tokens, self.tcfg.seed, epoch,
                                    bucket_width=self.tcfg.target_bucket, sort_within=src)
        else:
            batches = epoch_batches(src, tgt, self.tcfg.max_tokens, self.tcfg.seed, epoch)
        usable = len(batches) - len(batches) % self.dist.world_size
        return batches[self.dist.rank : usable : self.dist.world_size]

    def updates(self) -> Iterator[list[np.ndarray]]:
        """Groups of ``update_freq`` batches from the saved position on, epoch after epoch."""
        while self.tcfg.max_epochs <= 0 or self.progress.epoch <= self.tcfg.max_epochs:
            batches = self.epoch_batch_list(self.progress.epoch)
            while self.progress.position < len(batches):
                start = self.progress.position
                self.progress.position = min(start + self.tcfg.update_freq, len(batches))
                yield batches[start : self.progress.position]
            self.progress.epoch += 1
            self.progress.position = 0

    # -- steps -------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """The forward pass's compute context: mixed precision when amp is on, and float32 linear layers on
        ``train.cpu_gemm``'s backend (their backward passes stay on the backend their forward pass took)."""
        with autocast(self.amp, self.device), cpu_gemm(self.tcfg.cpu_gemm):
            yield

    def batch_loss(self, batch: Batch, norm: float, stats: dict[str, float]) -> torch.Tensor:
        """CE + Σ weight·aux for one batch, scaled by its share ``norm`` of the update's target tokens."""
        assert batch.tgt_out is not None
        ntokens = batch.num_tgt_tokens
        with self.autocast():  # the losses project onto the vocabulary themselves: in the autocast dtype too
            output = self.wrapped(batch)
            loss_sum, nll_sum = output_nll(output.hidden, output.project, batch.tgt_out, self.tcfg.label_smoothing)
            aux_values = [aux.compute(output, batch).float() for aux in self.losses]
        loss = loss_sum / norm
        stats["nll"] += float(nll_sum)
        stats["tokens"] += ntokens
        stats["src_tokens"] += int(batch.src_lengths.sum())
        for aux, value in zip(self.losses, aux_values):
            loss = loss + aux.weight * value * (ntokens / norm)
            stats[aux.name] += float(value.detach()) * ntokens
        return loss

    def train_step(self, group: list[np.ndarray], stats: dict[str, float]) -> None:
        """One update over ``group`` (gradient accumulation), with clipping and the LR schedule."""
        self.wrapped.train()
        batches = [self.make_batch(self.train_data, indices) for indices in group]
        norm = self.dist.all_reduce_sum(float(sum(b.num_tgt_tokens for b in batches)))
        for index, batch in enumerate(batches):
            sync = index == len(batches) - 1
            with self.dist.no_sync(self.wrapped, sync):
                loss = self.batch_loss(batch, norm / self.dist.world_size, stats)
                self.scaler.scale(loss).backward()
        self.progress.step += 1
        self.progress.src_tokens += sum(int(b.src_lengths.sum()) for b in batches)
        self.progress.tgt_tokens += sum(b.num_tgt_tokens for b in batches)
        set_lr(self.optimizer, inverse_sqrt_lr(self.progress.step, self.tcfg))
        self.scaler.unscale_(self.optimizer)
        if self.tcfg.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tcfg.clip_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)

    # -- validation --------------------------------------------------------------------------------

    @torch.inference_mode()
    def valid_loss(self) -> float:
        """Mean NLL per target token on the dev set (teacher forcing, no label smoothing)."""
        assert self.valid_data is not None
        self.model.eval()
        nll, tokens = 0.0, 0
        lengths = (self.valid_data.src.lengths, self.valid_data.tgt.lengths)
        for indices in epoch_batches(*lengths, self.tcfg.max_tokens, 0, 0, shuffle=False):
            batch = self.make_batch(self.valid_data, indices)
            assert batch.tgt_out is not None
            with self.autocast():
                output = self.model(batch)
                nll += float(output_nll(output.hidden, output.project, batch.tgt_out, 0.0)[1])
            tokens += batch.num_tgt_tokens
        return nll / max(tokens, 1)

    def valid_bleu(self) -> float:
        """sacreBLEU of greedy (or ``valid_beam``) translations of the dev set against its raw references."""
        assert self.valid_data is not None
        count = len(self.valid_data)
        if self.tcfg.valid_max_sentences > 0:
            count = min(count, self.tcfg.valid_max_sentences)
        rows = [self.valid_data.src[i] for i in range(count)]
        fields = {name: [self.valid_data.fields[name][i] for i in range(count)] for name in self.fields}
        decode = dataclasses.replace(self.cfg.decode, beam_size=self.tcfg.valid_beam, nbest=1)
        with self.autocast():
            hyps = translate_rows(self.model, rows, decode, self.device, fields)
        texts = [self.tgt_vocab.decode(h[0].tokens) for h in hyps]
        return float(corpus_scores(texts, self.valid_refs[:count])["bleu"])

    def validate(self) -> ValidResult | None:
        """Dev loss and BLEU (on rank 0), logged; None when there is no dev set."""
        if self.valid_data is None:
            return None
        result = ValidResult(self.valid_loss())
        if self.tcfg.valid_bleu:
            result.bleu = self.valid_bleu()
        bleu = "" if result.bleu is None else f" | bleu {result.bleu:.2f}"
        logger.info("valid | update %d | loss %.3f | ppl %.2f%s", self.progress.step, result.loss, result.ppl, bleu)
        return result

    def is_improvement(self, valid: ValidResult | None) -> bool:
        """Whether ``valid`` beats the best so far (higher BLEU or lower loss); updates the patience count."""
        if valid is None:
            return False
        use_bleu = self.tcfg.best_metric == "bleu" and valid.bleu is not None
        score = valid.bleu if use_bleu else -valid.loss
        assert score is not None
        if self.progress.best is None or score > self.progress.best:
            self.progress.best = score
            self.progress.bad_validations = 0
            return True
        self.progress.bad_validations += 1
        return False

    # -- the loop ----------------------------------------------------------------------------------

    def should_stop(self) -> str | None:
        """The reason to stop now, if any."""
        t = self.tcfg
        if t.max_steps > 0 and self.progress.step >= t.max_steps:
            return f"reached train.max_steps={t.max_steps}"
        if t.max_minutes > 0 and self.progress.train_seconds >= 60 * t.max_minutes:
            return f"reached train.max_minutes={t.max_minutes}"
        if t.patience > 0 and self.progress.bad_validations >= t.patience:
            return f"no improvement in {t.patience} validations (train.patience)"
        return None

    def log_stats(self, stats: dict[str, float], seconds: float) -> None:
        """One log line of the running training figures, then reset them."""
        tokens = max(stats["tokens"], 1.0)
        parts = [f"update {self.progress.step}", f"epoch {self.progress.epoch}", f"nll {stats['nll'] / tokens:.3f}"]
        parts += [f"{aux.name} {stats[aux.name] / tokens:.4f}" for aux in self.losses]
        parts += [f"lr {self.optimizer.param_groups[0]['lr']:.2e}", f"tgt tok/s {stats['tokens'] / max(seconds, 1e-9):.0f}"]
        logger.info("train | %s", " | ".join(parts))
        stats.clear()

    def train(self) -> Progress:
        """Train until a stopping condition holds; validate and checkpoint every ``valid_every`` updates."""
        self.resume()
        set_lr(self.optimizer, inverse_sqrt_lr(max(self.progress.step, 1), self.tcfg))
        reason = self.should_stop()
        stats: dict[str, float] = _zero_stats()
        total = self.tcfg.max_steps if self.tcfg.max_steps > 0 else None
        bar = tqdm(total=total, initial=self.progress.step, disable=not (self.tcfg.progress and self.dist.is_main),
                   unit="upd", dynamic_ncols=True)
        last_saved = self.progress.step if reason else -1
        log_start = time.perf_counter()
        for group in ([] if reason else self.updates()):
            start = time.perf_counter()
            self.train_step(group, stats)
            self.progress.train_seconds += time.perf_counter() - start
            bar.update(1)
            if self.progress.step % self.tcfg.log_every == 0:
                bar.set_postfix(nll=f"{stats['nll'] / max(stats['tokens'], 1):.3f}", epoch=self.progress.epoch)
                self.log_stats(stats, time.perf_counter() - log_start)
                stats, log_start = _zero_stats(), time.perf_counter()
            if self.progress.step % self.tcfg.valid_every == 0:
                valid = self.validate()
                self.save(valid, self.is_improvement(valid))
                last_saved = self.progress.step
            reason = self.should_stop()
            if reason:
                break
        bar.close()
        if last_saved != self.progress.step:
            valid = self.validate()
            self.save(valid, self.is_improvement(valid))
        seconds = max(self.progress.train_seconds, 1e-9)
        logger.info("done: %s; %d updates, %.1f min, %.0f src tok/s, %.0f tgt tok/s", reason or "finished the epochs",
                    self.progress.step, seconds / 60, self.progress.src_tokens / seconds,
                    self.progress.tgt_tokens / seconds)
        return self.progress


def _zero_stats() -> dict[str, float]:
    """Running totals of the training figures (NLL, tokens, each auxiliary loss), all starting at 0."""
    return defaultdict(float)
