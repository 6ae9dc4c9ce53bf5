"""The training loop: token batches, accumulation, clipping, validation, checkpoints, resume (docs/config.md, "train").

Resuming is exact: a checkpoint stores the model, the optimiser, the update count, every process's RNG
states and the data position (epoch and batch within it); the batch list of an epoch is rebuilt from the
seed, so a run that is interrupted and resumed ends with the same parameters as one that is not. SIGINT or
SIGTERM finishes the current update and saves such a checkpoint before the process stops.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import signal
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

from ordo.checkpoint import BEST_NAME, load_checkpoint, save_checkpoint
from ordo.config import ExperimentConfig, to_dict
from ordo.data.batch import Batch
from ordo.data.batching import collate, epoch_batches
from ordo.data.corpus import ParallelData
from ordo.data.shards import data_dirs, epoch_shard
from ordo.data.textio import read_lines
from ordo.data.vocab import Vocab
from ordo.decoding.translator import translate_rows
from ordo.errors import CheckpointError, TrainingInterrupted
from ordo.evaluation.bleu import corpus_scores
from ordo.gemm import cpu_gemm
from ordo.losses import AuxLoss, output_nll
from ordo.precision import amp_dtype, autocast, describe
from ordo.provenance import environment, record_start
from ordo.training.checkpoint import initialise_from, pick_checkpoint, prune_checkpoints, restore_best
from ordo.training.compiled import batch_pad_multiple, forward_losses
from ordo.training.distributed import DistributedContext
from ordo.training.fingerprint import fingerprint_changes, split_fingerprint
from ordo.training.interrupt import StopSignals
from ordo.training.optim import build_optimizer, inverse_sqrt_lr, load_optimizer_state, set_lr

logger = logging.getLogger("ordo.train")

LIMIT_REACHED = 256  # above every signal's number: agreed_stop's code for a stopping condition of rank 0
PROCESS_SEED_STRIDE = 1_000_003  # process r > 0 draws dropout from seed + r x this, apart from rank 0's seed
SHARED_FILESYSTEM = "training on several machines needs the run directory on a filesystem they all share"


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
        if self.dist.rank > 0:  # weights as rank 0's (DDP broadcasts them); a dropout stream of its own
            torch.manual_seed(cfg.train.seed + PROCESS_SEED_STRIDE * self.dist.rank)
        self.losses = losses or []
        self.forward_losses = forward_losses(self.wrapped, self.losses, self.tcfg.label_smoothing, self.tcfg.compile)
        self.pad_multiple = batch_pad_multiple(self.tcfg.pad_multiple, self.tcfg.compile)
        self.fields = fields
        self.optimizer = build_optimizer(self.model, self.tcfg)
        self.amp = amp_dtype(self.tcfg.amp, self.device)
        self.scaler = torch.amp.GradScaler(enabled=self.amp == torch.float16)
        if self.dist.is_main:
            logger.info("precision: %s", describe(self.tcfg.amp, self.device, self.tcfg.cpu_gemm))
        self.data_dirs = data_dirs(cfg.data)  # the shards; the first gives valid and the vocabularies
        data_dir = self.data_dirs[0]
        self.train_data = ParallelData.open(data_dir, "train")  # the training split of the epoch's shard
        self.valid_data = ParallelData.open(data_dir, "valid") if (data_dir / "valid.src.idx").exists() else None
        self.valid_refs = read_lines(data_dir / "valid.tgt.txt") if self.valid_data is not None else []
        self.tgt_vocab = Vocab.load(data_dir / self.train_data.meta.tgt_vocab)
        self.progress = Progress()
        self.saved_step = -1  # the update whose checkpoint is complete on disk (validated when there is a dev set)
        self.off_grid: list[Path] = []  # checkpoints off the valid_every grid, to go once a later one is saved
        self.epoch_length = 0  # batches in this process's share of the current epoch (0: not built yet)

    # -- checkpoints -------------------------------------------------------------------------------

    def rng_state(self) -> dict[str, torch.Tensor]:
        """This process's random number generator states: torch's CPU one and, on a GPU, the CUDA one
        (dropout draws from them; the batch order comes from the seed; nothing draws from Python's or NumPy's
        generators)."""
        state = {"torch": torch.get_rng_state()}
        if self.device.type == "cuda":
            state["cuda"] = torch.cuda.get_rng_state(self.device)
        return state

    def state_dict(
        self, valid: ValidResult | None, rng: list[dict[str, torch.Tensor]], periodic: bool
    ) -> dict[str, Any]:
        """Everything a resumed run needs (weights-only loadable: tensors, numbers, strings, containers);
        ``rng`` holds every process's :meth:`rng_state`, by rank; ``periodic`` says whether the save is on the
        ``valid_every`` grid (False: a signal stopped the run, or it ended between two validations)."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "progress": vars(self.progress).copy(),
            "rng": rng,
            "config": to_dict(self.cfg),
            "valid": None if valid is None else {"loss": valid.loss, "bleu": valid.bleu},
            "periodic": periodic,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore model, optimiser (under this run's β, ε and weight decay), scaler, progress and this process's
        RNG states from a checkpoint. A checkpoint of another number of processes resumes at the same place in the
        epoch (:func:`rescaled_position`)."""
        self.model.load_state_dict(state["model"])
        load_optimizer_state(self.optimizer, state["optimizer"], self.tcfg)
        if state["scaler"]:  # empty when saved without fp16 (a disabled scaler): an enabled one starts afresh
            self.scaler.load_state_dict(state["scaler"])
        self.progress = Progress(**state["progress"])
        saved = state["rng"]
        if not isinstance(saved, list):  # checkpoints written before the states of every rank were kept
            saved = [saved] * self.dist.world_size  # (by as many processes as this run: nothing to tell otherwise)
        if len(saved) != self.dist.world_size:
            self.progress.position = rescaled_position(self.progress.position, len(saved), self.dist.world_size)
            logger.warning("the checkpoint was saved by %d processes, this run has %d: each resumes at batch %d of its "
                           "share of the epoch, and dropout will not repeat an uninterrupted run", len(saved),
                           self.dist.world_size, self.progress.position)
        if self.dist.rank < len(saved):  # a process the checkpoint has no state for keeps its own stream
            rng = saved[self.dist.rank]
            torch.set_rng_state(rng["torch"].cpu())
            if self.device.type == "cuda" and rng.get("cuda") is not None:
                torch.cuda.set_rng_state(rng["cuda"].cpu(), self.device)

    def resume(self) -> bool:
        """Restore the newest readable ``step_N.pt`` of this run, if any (else apply ``train.init_from``).

        Rank 0 picks the checkpoint (:func:`~ordo.training.checkpoint.pick_checkpoint`) and the other processes
        load the same file; when one of them cannot (no shared filesystem), every process raises a
        CheckpointError rather than some starting afresh. Returns whether it resumed."""
        path, state, error = pick_checkpoint(self.ckpt_dir, self.device) if self.dist.is_main else (None, None, None)
        path, error = self.dist.broadcast_object((path, error))
        if error is not None:
            raise CheckpointError(error)
        if path is None:
            if self.tcfg.init_from:
                self.initialise(Path(self.tcfg.init_from))
            return False
        if state is None:
            try:
                state = load_checkpoint(path, map_location=self.device)
            except CheckpointError as err:
                error = f"rank {self.dist.rank}: {err} (rank 0 resumes from it; {SHARED_FILESYSTEM})"
        if self.dist.all_reduce_max(int(error is not None)):
            raise CheckpointError(error or f"{path}: another process cannot read it ({SHARED_FILESYSTEM})")
        assert state is not None
        try:
            self.load_state(state)
        except (RuntimeError, ValueError) as err:  # torch's messages for weights or optimizer groups that differ
            reason = [line.strip() for line in str(err).strip().splitlines()]
            raise CheckpointError(f"{path}: does not fit the model this config builds ({' '.join(reason[:2])}); "
                                  "resume with the model settings the run was started with, or train a new run "
                                  "dir") from None
        periodic = state.get("periodic", self.progress.step % self.tcfg.valid_every == 0)  # older: by the grid
        self.off_grid = [] if periodic else [path]
        complete = state["valid"] is not None or self.valid_data is None
        self.saved_step = self.progress.step if complete else -1
        if state["valid"] is not None and self.progress.bad_validations == 0:  # alike on every process
            self.dist.on_main(lambda: restore_best(self.ckpt_dir, state, path))
        logger.info("resumed from %s (update %d, epoch %d)", path, self.progress.step, self.progress.epoch)
        return True

    def initialise(self, path: Path) -> None:
        """:func:`~ordo.training.checkpoint.initialise_from` ``path`` in every process, each into its own replica.
        When some processes cannot (the file is on one machine's disk, or a relative path names another file
        there), every process raises a CheckpointError naming the first of them, rather than the others going on
        to wait for it in their first update."""
        error: str | None = None
        try:
            initialise_from(self.model, path, self.device)
        except CheckpointError as err:
            error = str(err)
        errors = self.dist.all_gather_object(error)
        if error is not None and None not in errors:  # alike in every process (weights of another model)
            raise CheckpointError(error)
        for rank, other in enumerate(errors):
            if other is not None:
                raise CheckpointError(f"rank {rank}: {other} (every process reads train.init_from: on several "
                                      "machines it must be at that path on each)")

    def save(self, valid: ValidResult | None, is_best: bool, periodic: bool = True) -> Path:
        """Write ``step_N.pt`` (and ``best.pt`` when ``is_best``) on rank 0, then drop old periodic checkpoints
        and those off the grid (``periodic`` False: a signal's, the end's); returns the path of ``step_N.pt``.
        Every process calls it: each one's RNG states go into the checkpoint, and a save that fails on rank 0 (a
        full disk) stops every process with its CheckpointError."""
        rng = self.dist.all_gather_object(self.rng_state())
        path = self.ckpt_dir / f"step_{self.progress.step}.pt"
        self.dist.on_main(lambda: self.write_checkpoint(path, self.state_dict(valid, rng, periodic), is_best, periodic))
        return path

    def write_checkpoint(self, path: Path, state: dict[str, Any], is_best: bool, periodic: bool) -> None:
        """Rank 0's part of :meth:`save`: write ``state`` to ``path`` (and ``best.pt`` when ``is_best``), then drop
        old periodic checkpoints and those off the grid."""
        save_checkpoint(state, path)
        if is_best:
            save_checkpoint(state, self.ckpt_dir / BEST_NAME)
        prune_checkpoints(self.ckpt_dir, self.tcfg.keep_last, self.off_grid)
        self.off_grid = [] if periodic else [path]

    # -- data --------------------------------------------------------------------------------------

    def host_batch(self, data: ParallelData, indices: np.ndarray) -> Batch:
        """Collate rows ``indices`` of ``data`` with the fields the methods need, in host memory."""
        src = [data.src[i] for i in indices]
        tgt = [data.tgt[i] for i in indices]
        fields = {name: [data.fields[name][i] for i in indices] for name in self.fields}
        return collate(indices, src, tgt, fields, self.pad_multiple)

    def make_batch(self, data: ParallelData, indices: np.ndarray) -> Batch:
        """:meth:`host_batch` on the training device."""
        return self.host_batch(data, indices).to(self.device)

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

    def read_epoch_shard(self) -> None:
        """Make ``train_data`` the training split of the shard the current epoch reads (:func:`epoch_shard`; a run
        resumed part-way through an epoch goes on with the shard its checkpoint recorded), and log it.

        A run on one data directory goes on with it wherever it now lies (a corpus moved, or copied to a job's
        local disk): only a list of shards needs the recorded one to tell which the epoch was reading."""
        resumed = self.progress.shard if self.progress.position else ""
        if resumed and len(self.data_dirs) == 1 and Path(resumed).resolve() != self.data_dirs[0].resolve():
            logger.warning("the checkpoint stopped epoch %d part-way through %s; going on with %s, the data "
                           "directory now given", self.progress.epoch, resumed, self.data_dirs[0])
            resumed = ""
        shard = epoch_shard(self.data_dirs, self.progress.epoch, resumed)
        if self.train_data.src.prefix.parent != shard:
            del self.train_data  # one shard's lengths in memory at a time
            self.train_data = ParallelData.open(shard, "train")
        self.progress.shard = str(shard)
        logger.info("epoch %d | shard %d of %d: %s (%d pairs)", self.progress.epoch, self.data_dirs.index(shard) + 1,
                    len(self.data_dirs), shard, len(self.train_data))
        if self.dist.is_main:
            self.check_data_fingerprint()

    def check_data_fingerprint(self) -> None:
        """Record the fingerprint of the training split the epoch reads (:mod:`ordo.training.fingerprint`) and,
        in a run resumed part-way through an epoch, warn, naming each side and how, when it differs from the
        checkpoint's: the split was changed in place since, and the checkpoint's place in the epoch now indexes
        another list of batches.

        A warning, not an error, as for a changed ``train.seed`` or ``train.max_tokens`` (ordo.api's
        ``warn_batch_changes``), which do the same to the epoch: the run can go on, only the rest of that epoch may
        skip some sentences and repeat others. Data of another vocabulary, which would make the weights wrong, is
        refused before this (``check_run_vocabulary``), and what changes with the same vocabulary is most often
        meant (pairs added or filtered, ``ordo prepare --vocab-from``): refusing would strand a preempted job that
        restarts by itself, with no means to go on."""
        now = split_fingerprint(self.train_data)
        split = self.train_data.src.prefix.with_suffix("")
        changes = fingerprint_changes(self.progress.data_fingerprint, now, split) if self.progress.position else []
        if changes:
            logger.warning("the training data changed since the checkpoint was saved (%s): epoch %d goes on from "
                           "batch %d of another list of batches (some sentences may be skipped or repeated until "
                           "the epoch ends)", "; ".join(changes), self.progress.epoch, self.progress.position)
        self.progress.data_fingerprint = now

    def updates(self) -> Iterator[list[np.ndarray]]:
        """Groups of ``update_freq`` batches from the saved position on, epoch after epoch, shard after shard."""
        while self.tcfg.max_epochs <= 0 or self.progress.epoch <= self.tcfg.max_epochs:
            self.read_epoch_shard()
            batches = self.epoch_batch_list(self.progress.epoch)
            self.epoch_length = len(batches)
            while self.progress.position < len(batches):
                start = self.progress.position
                self.progress.position = min(start + self.tcfg.update_freq, len(batches))
                yield batches[start : self.progress.position]
            self.progress.epoch += 1
            self.progress.position = 0
            del batches  # the next shard's arrays replace this shard's rather than join them

    # -- steps -------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """The forward pass's compute context: mixed precision when amp is on, and float32 linear layers on
        ``train.cpu_gemm``'s backend (their backward passes stay on the backend their forward pass took)."""
        with autocast(self.amp, self.device), cpu_gemm(self.tcfg.cpu_gemm):
            yield

    def batch_loss(self, batch: Batch, counts: tuple[int, int], norm: float, stats: dict[str, Any]) -> torch.Tensor:
        """CE + Σ weight·aux for one batch of ``counts`` (target, source) tokens, scaled by its share ``norm`` of
        the update's target tokens. The running figures in ``stats`` stay on the device (no wait for the device
        at every batch); :meth:`log_stats` reads them."""
        ntokens, src_tokens = counts
        with self.autocast():  # the losses project onto the vocabulary themselves: in the autocast dtype too
            loss_sum, nll_sum, aux_values = self.forward_losses(batch)
        loss = loss_sum / norm
        stats["nll"] += nll_sum.detach()
        stats["tokens"] += ntokens
        stats["src_tokens"] += src_tokens
        for aux, value in zip(self.losses, aux_values):
            loss = loss + aux.weight * value * (ntokens / norm)
            stats[aux.name] += value.detach() * ntokens
        return loss

    def train_step(self, group: list[np.ndarray], stats: dict[str, Any]) -> None:
        """One update over ``group`` (gradient accumulation), with clipping and the LR schedule."""
        self.wrapped.train()
        batches = [self.host_batch(self.train_data, indices) for indices in group]
        counts = [(b.num_tgt_tokens, int(b.src_lengths.sum())) for b in batches]  # counted in host memory
        norm = self.dist.all_reduce_sum(float(sum(tgt for tgt, _ in counts)))
        for index, (batch, batch_counts) in enumerate(zip(batches, counts)):
            sync = index == len(batches) - 1
            with self.dist.no_sync(self.wrapped, sync):
                loss = self.batch_loss(batch.to(self.device), batch_counts, norm / self.dist.world_size, stats)
                self.scaler.scale(loss).backward()
        self.progress.step += 1
        self.progress.src_tokens += sum(src for _, src in counts)
        self.progress.tgt_tokens += sum(tgt for tgt, _ in counts)
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
        """sacreBLEU of greedy (or ``valid_beam``) translations of the dev set against its raw references; each
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
            hyps = translate_rows(self.model, rows, decode, self.device, fields)
        shares = self.dist.all_gather_object([self.tgt_vocab.decode(h[0].tokens) for h in hyps])
        texts = [shares[i % self.dist.world_size][i // self.dist.world_size] for i in range(count)]
        return float(corpus_scores(texts, self.valid_refs[:count])["bleu"])

    def validate(self) -> ValidResult | None:
        """Dev loss and BLEU, the processes sharing the work (alike on every process), logged; None when there is
        no dev set."""
        if self.valid_data is None:
            return None
        result = ValidResult(self.valid_loss())
        if self.tcfg.valid_bleu:
            result.bleu = self.valid_bleu()
        bleu = "" if result.bleu is None else f" | bleu {result.bleu:.2f}"
        logger.info("valid | update %d | loss %.3f | ppl %.2f%s", self.progress.step, result.loss, result.ppl, bleu)
        return result

    def is_improvement(self, valid: ValidResult | None) -> bool:
        """Whether ``valid`` beats the best so far (higher BLEU or lower loss); updates the patience count.

        A run resumed with another figure than its best was measured by (``train.best_metric``, or
        ``train.valid_bleu`` turned off) starts its best and patience afresh from this validation, rather than
        comparing a loss with a BLEU score."""
        if valid is None:
            return False
        metric = "bleu" if self.tcfg.best_metric == "bleu" and valid.bleu is not None else "loss"
        score = valid.bleu if metric == "bleu" else -valid.loss
        assert score is not None
        if self.progress.best is not None and self.progress.best_metric not in ("", metric):
            logger.warning("the best checkpoint so far was chosen by %s, validations now score by %s: best.pt and "
                           "the patience count start again from this one", self.progress.best_metric, metric)
            self.progress.best = None
        self.progress.best_metric = metric
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

    def log_stats(self, stats: dict[str, Any], seconds: float) -> None:
        """One log line of the running training figures, then reset them; on a GPU with the peak memory
        allocated since the last line (a figure that grows from line to line is a leak)."""
        tokens = max(stats["tokens"], 1.0)
        parts = [f"update {self.progress.step}", f"epoch {self.progress.epoch}", f"nll {float(stats['nll']) / tokens:.3f}"]
        parts += [f"{aux.name} {float(stats[aux.name]) / tokens:.4f}" for aux in self.losses]
        parts += [f"lr {self.optimizer.param_groups[0]['lr']:.2e}", f"tgt tok/s {stats['tokens'] / max(seconds, 1e-9):.0f}"]
        if self.device.type == "cuda":
            parts.append(f"peak mem {torch.cuda.max_memory_allocated(self.device) / 2**20:.0f} MB")
            torch.cuda.reset_peak_memory_stats(self.device)
        logger.info("train | %s", " | ".join(parts))
        stats.clear()

    def agreed_stop(self, signal_number: int) -> tuple[int, str | None]:
        """Whether to stop after this update, decided alike by every process: ``(signal, reason)``, ``signal``
        being the number of a signal received (0: none) and ``reason`` None to go on.

        A signal that any process received stops them all; the stopping conditions are rank 0's
        (``train.max_minutes`` is measured per process), so all processes stop at the same update. A signal that
        arrives at the run's last update (a stopping condition holds, or the last epoch is done) is only logged:
        the run ends as it would have without it, validated and saved, and ``ordo train`` exits with status 0."""
        reason = self.should_stop() if self.dist.is_main else None
        code = self.dist.all_reduce_max(LIMIT_REACHED * int(reason is not None) + signal_number)
        if code >= LIMIT_REACHED:
            self.log_late_signal(signal_number)
            return 0, reason or "rank 0 reached a stopping condition"
        if code and self.epochs_done():  # alike on every process: their shares of an epoch are as long
            self.log_late_signal(signal_number)
            return 0, None  # the loop ends with the epochs, as an uninterrupted run's
        return code, f"received {signal.Signals(code).name}" if code else None

    def epochs_done(self) -> bool:
        """Whether the update just done was the last one of the last epoch (``train.max_epochs``)."""
        last_epoch = 0 < self.tcfg.max_epochs <= self.progress.epoch
        return last_epoch and 0 < self.epoch_length <= self.progress.position

    @staticmethod
    def log_late_signal(signal_number: int) -> None:
        """Log that ``signal_number``, this process's (0: none), arrived at the run's last update: it stops nothing."""
        if signal_number:
            logger.warning("%s arrived at the last update of the run: finishing it as usual (saving it, validated)",
                           signal.Signals(signal_number).name)

    def train(self) -> Progress:
        """Train until a stopping condition holds; validate and checkpoint every ``valid_every`` updates.

        Raises:
            TrainingInterrupted: after SIGINT or SIGTERM, once the current update is done and saved.
        """
        with StopSignals() as signals:
            self.resume()
            set_lr(self.optimizer, inverse_sqrt_lr(max(self.progress.step, 1), self.tcfg))
            reason = self.should_stop()  # alike on every process: they all loaded the same progress
            if not reason:  # a broken environment.yaml stops every process, not rank 0 alone
                self.dist.on_main(lambda: record_start(self.run_dir, self.progress.step, environment(
                    self.device, self.amp, self.tcfg.cpu_gemm, self.dist.world_size)))
            received = 0
            stats: dict[str, Any] = _zero_stats()
            total = self.tcfg.max_steps if self.tcfg.max_steps > 0 else None
            bar = tqdm(total=total, initial=self.progress.step,
                       disable=not (self.tcfg.progress and self.dist.is_main), unit="upd", dynamic_ncols=True)
            last_saved = self.saved_step  # a finished run resumed is not validated and saved again
            log_start = time.perf_counter()
            for group in ([] if reason else self.updates()):
                start = time.perf_counter()
                self.train_step(group, stats)
                self.progress.train_seconds += time.perf_counter() - start
                bar.update(1)
                if self.progress.step % self.tcfg.log_every == 0:
                    nll = float(stats["nll"]) / max(stats["tokens"], 1)
                    bar.set_postfix(nll=f"{nll:.3f}", epoch=self.progress.epoch, shard=Path(self.progress.shard).name)
                    self.log_stats(stats, time.perf_counter() - log_start)
                    stats, log_start = _zero_stats(), time.perf_counter()
                if self.progress.step % self.tcfg.valid_every == 0:
                    valid = self.validate()
                    self.save(valid, self.is_improvement(valid))
                    last_saved = self.progress.step
                received, reason = self.agreed_stop(signals.received)
                if reason:
                    break
            bar.close()
            if received:
                self.stop_on_signal(received, last_saved)
            if last_saved != self.progress.step:  # a signal now changes nothing: the run is finishing anyway
                valid = self.validate()
                self.save(valid, self.is_improvement(valid), periodic=False)
        seconds = max(self.progress.train_seconds, 1e-9)
        logger.info("done: %s; %d updates, %.1f min, %.0f src tok/s, %.0f tgt tok/s", reason or "finished the epochs",
                    self.progress.step, seconds / 60, self.progress.src_tokens / seconds,
                    self.progress.tgt_tokens / seconds)
        return self.progress

    def stop_on_signal(self, signal_number: int, last_saved: int) -> None:
        """Save the update just finished (unless a periodic checkpoint holds it), log, and raise.

        Nothing is validated: the checkpoint's ``valid`` is None and ``best.pt`` is left alone, as they would
        be at this update in an uninterrupted run.

        Raises:
            TrainingInterrupted: always.
        """
        path = self.ckpt_dir / f"step_{self.progress.step}.pt"
        if last_saved != self.progress.step:
            path = self.save(None, is_best=False, periodic=False)
        name = signal.Signals(signal_number).name
        message = f"stopped by {name} after update {self.progress.step}; saved {path} (run again to resume)"
        logger.warning("%s", message)
        raise TrainingInterrupted(signal_number, message)


def rescaled_position(position: int, saved_processes: int, processes: int) -> int:
    """The batch position in each process's share of an epoch (every ``processes``-th batch) that continues
    where ``saved_processes`` processes stood at ``position`` each (``position x saved_processes`` batches of the
    epoch done); rounded down, so that a batch is trained twice rather than left out."""
    return position * saved_processes // processes


def _zero_stats() -> dict[str, Any]:
    """Running totals of the training figures (NLL, tokens, each auxiliary loss), all starting at 0; the losses
    become tensors on the training device (:meth:`Trainer.batch_loss`)."""
    return defaultdict(float)
