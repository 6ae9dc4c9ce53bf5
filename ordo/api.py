"""The Python API behind every CLI verb: train a run, load it, translate and score strings, average checkpoints.

Example (in a notebook)::

    from ordo import api
    run = api.load_run("runs/multi30k")
    run.translate(["A man is riding a bike."], beam_size=5)

Training and averaging live here; a run directory's files in :mod:`ordo.run_dir`, loading a run
(:class:`LoadedRun`, :func:`load_run`, :func:`load_ensemble`) in :mod:`ordo.loaded_run`, both importable from here.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import numpy as np
import torch

from ordo.build import count_parameters
from ordo.checkpoint import average_checkpoints, save_checkpoint, step_checkpoints
from ordo.config import ExperimentConfig
from ordo.data.alignment.reorder_field import FIELD as REORDER_FIELD
from ordo.data.corpus import DataMeta, TokenArray
from ordo.data.shards import data_dirs, shard_metas
from ordo.errors import CheckpointError, ConfigError, InputError, TrainingInterrupted
from ordo.loaded_run import LoadedRun, load_ensemble, load_run, load_weights
from ordo.run_dir import (
    build_for_data,
    check_run_vocabulary,
    resolve_checkpoint,
    run_config,
    run_data_meta,
    write_run_files,
)

__all__ = ["LoadedRun", "average", "build_for_data", "load_ensemble", "load_run", "load_weights", "resolve_checkpoint",
           "run_config", "run_data_meta", "setup_logging", "train"]

if TYPE_CHECKING:
    from ordo.training.distributed import DistributedContext
    from ordo.training.progress import Progress

logger = logging.getLogger("ordo")
LOG_DATE = "%Y-%m-%d %H:%M:%S"  # the time at the head of each log line


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted, so a later redirection (a notebook,
    pytest's capture) is honoured instead of a stream closed since set-up."""

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def setup_logging(log_file: Path | None = None, level: int = logging.INFO, rank: int | None = None) -> None:
    """Log ``ordo.*`` messages to stderr and, if given, to ``log_file`` (appending); ``rank``, given for one of
    several training processes, heads each stderr line (``rank 1 | ...``), so that a warning says which process
    gave it."""
    root = logging.getLogger("ordo")
    root.setLevel(level)
    stderr = [h for h in root.handlers if getattr(h, "_ordo_stderr", False)]
    if not stderr:
        stderr = [_StderrHandler()]
        stderr[0]._ordo_stderr = True  # type: ignore[attr-defined]
        root.addHandler(stderr[0])
    head = "" if rank is None else f"rank {rank} | "
    stderr[0].setFormatter(logging.Formatter(f"%(asctime)s | {head}%(name)s | %(message)s", LOG_DATE))
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        for h in [h for h in root.handlers if isinstance(h, logging.FileHandler)]:
            root.removeHandler(h)
            h.close()
        file_handler = logging.FileHandler(log_file, encoding="utf-8")
        file_handler.setFormatter(logging.Formatter("%(asctime)s | %(name)s | %(message)s", LOG_DATE))
        root.addHandler(file_handler)


def check_positions(cfg: ExperimentConfig, dirs: list[Path], meta: DataMeta) -> None:
    """Refuse, before training, a training or dev row that the Transformer's position table cannot hold: a side of
    more than ``model.max_positions - 1`` pieces (EOS, or BOS, takes one position), which ``ordo prepare`` keeps in
    a dev set (and in a training set prepared with a ``max_len`` above it). A lattice source is left to its
    method, which checks its own positions; the rnn family has no position table.

    Args:
        cfg: the run's config.
        dirs: the training shards; the first one's dev split is checked too.
        meta: the first shard's ``data.yaml``.

    Raises:
        InputError: naming the ``{split}.{side}.txt`` file and line of the first such row.
    """
    if cfg.model.family != "transformer":
        return
    limit = cfg.model.max_positions - 1
    splits = [(data_dir, "train") for data_dir in dirs]
    splits += [(dirs[0], "valid")] if (dirs[0] / "valid.src.idx").is_file() else []
    sides = ("tgt",) if meta.src_lattice else ("src", "tgt")
    for data_dir, split in splits:
        for side in sides:
            lengths = TokenArray.open(data_dir / f"{split}.{side}").lengths
            over = np.flatnonzero(lengths > limit)
            if over.size:
                remedy = f"prepare with --max-len {limit}" if split == "train" else "drop them from the dev set"
                raise InputError(f"{data_dir / f'{split}.{side}.txt'}:{over[0] + 1}: {lengths[over[0]]} pieces, more "
                                 f"than model.max_positions-1={limit} ({over.size} such lines); raise "
                                 f"model.max_positions, or {remedy}")


def _missing_fields_message(data_dir: Path, meta: DataMeta, missing: list[str]) -> str:
    """The error for methods that need per-token batch fields ``missing`` that the training data ``data_dir``
    (whose ``data.yaml`` is ``meta``) lacks, with how to prepare it: ExGRE/ReFSR's ``reorder_positions`` (which a
    lattice corpus cannot have: it aligns the source's words, not lattice edges), or a lattice's spans."""
    message = f"{data_dir}: the methods need batch fields {missing} that this data has not got"
    if REORDER_FIELD in missing and meta.src_lattice:
        return (f"{message}: a lattice corpus cannot have it ({REORDER_FIELD} aligns the source's words, not lattice "
                "edges); train ExGRE/ReFSR on data prepared without --lattice, with --set reorder_positions=true")
    if REORDER_FIELD in missing:
        return f"{message}: prepare the data with --set reorder_positions=true"
    return f"{message}: prepare the data with --lattice SEGMENTERS"


def train(cfg: ExperimentConfig, run_dir: str | Path) -> Progress:
    """Train (or resume) the run in ``run_dir``: saves the resolved config, vocabularies, parameter count
    and a log file there, then runs :class:`ordo.training.trainer.Trainer`. ``cfg.data`` may name several
    shards (``DIR1:DIR2:...``, :mod:`ordo.data.shards`): each must hold a training split and the first's
    vocabularies, or an InputError names it.

    The run directory is locked while it trains (:mod:`ordo.training.lock`), so a second training of the same run
    stops before writing anything there. Under torchrun rank 0 alone, the process that writes it, takes the lock,
    once every process has joined, and tells the others whether it could: refused, they all stop with its error.

    Raises:
        RunLocked: when another process is training in ``run_dir``, naming it (on every torchrun process).
    """
    from ordo.training.distributed import DistributedContext  # imported here, as the trainer: translating
    from ordo.training.lock import run_lock  # needs neither

    run_dir = Path(run_dir)
    dirs = data_dirs(cfg.data)
    metas = shard_metas(dirs)
    check_run_vocabulary(run_dir, dirs[0], metas[0])
    check_positions(cfg, dirs, metas[0])
    dist = DistributedContext(cfg.train.device)  # under torchrun: waits until every process has joined
    with contextlib.ExitStack() as lock:
        dist.on_main(lambda: lock.enter_context(run_lock(run_dir)))
        return _train_locked(cfg, run_dir, dirs, metas, dist)


def _train_locked(cfg: ExperimentConfig, run_dir: Path, dirs: list[Path], metas: list[DataMeta],
                  dist: DistributedContext) -> Progress:
    """:func:`train` once the run directory is locked: ``dirs`` are the training shards, ``metas`` their
    ``data.yaml``; ``dist`` the processes, of which rank 0 alone writes the run's files."""
    from ordo.training.trainer import Trainer  # imported here: translating needs neither it nor sacreBLEU

    data_dir, meta = dirs[0], metas[0]
    if cfg.train.threads > 0:
        torch.set_num_threads(cfg.train.threads)
    setup_logging(run_dir / "train.log" if dist.is_main else None, logging.INFO if dist.is_main else logging.WARNING,
                  dist.rank if dist.world_size > 1 else None)
    torch.manual_seed(cfg.train.seed)
    built = build_for_data(cfg, meta)
    for shard_dir, shard_meta in zip(dirs, metas):
        missing = [f for f in built.fields if f not in shard_meta.fields.get("train", [])]
        if missing:
            raise ConfigError(_missing_fields_message(shard_dir, shard_meta, missing))
    params = count_parameters(built.model)
    logger.info("model: %s, %d parameters (%.2fM)", cfg.model.family, params, params / 1e6)
    dist.on_main(lambda: write_run_files(cfg, run_dir, params, meta, data_dir))
    trainer = Trainer(built.model, cfg, run_dir, built.losses, built.fields, dist)
    interrupted: TrainingInterrupted | None = None
    try:
        progress = trainer.train()
    except TrainingInterrupted as err:  # every process stopped at the same update: they all close, as below
        interrupted = err.with_traceback(None)  # its frames hold the trainer
    # The trainer's DDP reducer lets go of the process group before the group is torn down: freed after it, a
    # process hung at the end of some runs. Not after other errors: tearing down while others are in a collective
    # can hang.
    del trainer
    dist.close()
    if interrupted is not None:
        raise interrupted
    return progress


def average(run_dir: str | Path, last: int = 5, output: str | Path | None = None) -> Path:
    """Average the weights of the last ``last`` periodic checkpoints into ``output``
    (default ``checkpoints/averaged.pt``), usable as ``--checkpoint averaged``. A run that a training holds
    (:func:`ordo.training.lock.training_holder`) is averaged as it stands, with a warning naming the training.

    Raises:
        ConfigError: when ``last`` is below 1.
        CheckpointError: when the run has no periodic checkpoints, or they hold different parameters.
    """
    from ordo.training.lock import training_holder  # as train's: the rest of ordo.training is not needed

    if last < 1:
        raise ConfigError(f"last: {last} is below its minimum 1 (the number of checkpoints to average)")
    run_dir = Path(run_dir)
    paths = step_checkpoints(run_dir / "checkpoints")[-last:]
    if not paths:
        raise CheckpointError(f"{run_dir / 'checkpoints'}: no step_N.pt checkpoints to average")
    if len(paths) < last:
        logger.warning("only %d checkpoints to average (asked for %d)", len(paths), last)
    holder = training_holder(run_dir)
    if holder is not None:
        logger.warning("%s is still training (%s): averaging its %d newest checkpoints so far, up to %s", run_dir,
                       holder, len(paths), paths[-1].name)
    weights = average_checkpoints(paths)
    target = Path(output) if output else run_dir / "checkpoints" / "averaged.pt"
    save_checkpoint({"model": weights, "averaged": [p.name for p in paths]}, target)
    return target

