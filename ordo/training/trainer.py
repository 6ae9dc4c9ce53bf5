"""The training loop: accumulation, clipping, the LR schedule, checkpoints, resume, stopping (docs/config.md,
"train"); the batches come from :mod:`ordo.training.batches`, the dev figures from :mod:`ordo.training.validation`.

Resuming is exact: a checkpoint stores the model, the optimiser, the update count, every process's RNG
states and the data position (epoch and batch within it); the batch list of an epoch is rebuilt from the
seed, so a run that is interrupted and resumed ends with the same parameters as one that is not. SIGINT or
SIGTERM finishes the current update and saves such a checkpoint before the process stops.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from ordo.checkpoint import BEST_NAME, load_checkpoint, save_checkpoint
from ordo.config import ExperimentConfig, to_dict
from ordo.data.batch import Batch
from ordo.data.shards import data_dirs
from ordo.errors import CheckpointError, TrainingInterrupted
from ordo.gemm import cpu_gemm
from ordo.losses import AuxLoss
from ordo.precision import amp_dtype, autocast, describe
from ordo.provenance import environment, record_start
from ordo.training.batches import BatchStream, rescaled_position
from ordo.training.checkpoint import initialise_from, pick_checkpoint, prune_checkpoints, restore_best
from ordo.training.compiled import batch_pad_multiple, forward_losses
from ordo.training.distributed import DistributedContext
from ordo.training.interrupt import StopSignals
from ordo.training.optim import build_optimizer, inverse_sqrt_lr, load_optimizer_state, set_lr
from ordo.training.progress import Progress
from ordo.training.validation import Validator, ValidResult

logger = logging.getLogger("ordo.train")

LIMIT_REACHED = 256  # above every signal's number: agreed_stop's code for a stopping condition of rank 0
PROCESS_SEED_STRIDE = 1_000_003  # process r > 0 draws dropout from seed + r x this, apart from rank 0's seed
SHARED_FILESYSTEM = "training on several machines needs the run directory on a filesystem they all share"


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
        self.optimizer = build_optimizer(self.model, self.tcfg)
        self.amp = amp_dtype(self.tcfg.amp, self.device)
        self.scaler = torch.amp.GradScaler(enabled=self.amp == torch.float16)
        if self.dist.is_main:
            logger.info("precision: %s", describe(self.tcfg.amp, self.device, self.tcfg.cpu_gemm))
        shards = data_dirs(cfg.data)  # the first gives valid and the vocabularies
        pad_multiple = batch_pad_multiple(self.tcfg.pad_multiple, self.tcfg.compile)
        self.batches = BatchStream(shards, self.tcfg, self.dist, fields, pad_multiple)
        self.validator = Validator(self.model, cfg, shards[0], self.batches.train_data.meta, fields, self.dist,
                                   self.batches.make_batch, self.autocast)
        self.progress = Progress()
        self.saved_step = -1  # the update whose checkpoint is complete on disk (validated when there is a dev set)
        self.off_grid: list[Path] = []  # checkpoints off the valid_every grid, to go once a later one is saved

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
        epoch (:func:`~ordo.training.batches.rescaled_position`)."""
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
        complete = state["valid"] is not None or self.validator.valid_data is None
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
        batches = [self.batches.host_batch(self.batches.train_data, indices) for indices in group]
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

    # -- the loop ----------------------------------------------------------------------------------

    def updates(self) -> Iterator[list[np.ndarray]]:
        """The groups of batches to train on, from where :attr:`progress` stands (:meth:`BatchStream.updates`)."""
        return self.batches.updates(self.progress)

    def validate(self) -> ValidResult | None:
        """:meth:`Validator.validate` at the current update (alike on every process); None without a dev set."""
        return self.validator.validate(self.progress.step)

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
        if code and self.batches.epochs_done(self.progress):  # alike on every process: their shares of an epoch are as long
            self.log_late_signal(signal_number)
            return 0, None  # the loop ends with the epochs, as an uninterrupted run's
        return code, f"received {signal.Signals(code).name}" if code else None

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
                    self.save(valid, self.validator.is_improvement(valid, self.progress))
                    last_saved = self.progress.step
                received, reason = self.agreed_stop(signals.received)
                if reason:
                    break
            bar.close()
            if received:
                self.stop_on_signal(received, last_saved)
            if last_saved != self.progress.step:  # a signal now changes nothing: the run is finishing anyway
                valid = self.validate()
                self.save(valid, self.validator.is_improvement(valid, self.progress), periodic=False)
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


def _zero_stats() -> dict[str, Any]:
    """Running totals of the training figures (NLL, tokens, each auxiliary loss), all starting at 0; the losses
    become tensors on the training device (:meth:`Trainer.batch_loss`)."""
    return defaultdict(float)
