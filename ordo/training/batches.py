"""Training's batch stream: the shards a run reads, an epoch's list of batches (rebuilt from the seed, each process
taking every N-th), the groups of ``update_freq`` batches from the position a checkpoint saved on, and the rows of
a batch collated with the fields the methods need (for validation too).

Its state is the epoch, the position within it, the shard and the shard's fingerprint, kept in the trainer's
:class:`~ordo.training.progress.Progress`, which every checkpoint saves and a resumed run restores: the stream
goes on from there, so a run that is interrupted and resumed trains on the same batches as one that is not.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ordo.config import TrainConfig
from ordo.data.batch import Batch
from ordo.data.batching import collate, epoch_batches
from ordo.data.corpus import ParallelData
from ordo.data.shards import epoch_shard
from ordo.training.distributed import DistributedContext
from ordo.training.fingerprint import fingerprint_changes, split_fingerprint
from ordo.training.progress import Progress

logger = logging.getLogger("ordo.train")


class BatchStream:
    """The training batches of the shards ``dirs`` (the first one's training split opened to begin with), as the
    process ``dist`` takes them under the settings ``tcfg``; batches carry the ``fields`` the methods need and are
    padded to a multiple of ``pad_multiple``."""

    def __init__(
        self,
        dirs: list[Path],
        tcfg: TrainConfig,
        dist: DistributedContext,
        fields: tuple[str, ...] = (),
        pad_multiple: int = 1,
    ) -> None:
        self.data_dirs = dirs
        self.tcfg = tcfg
        self.dist = dist
        self.fields = fields
        self.pad_multiple = pad_multiple
        self.train_data = ParallelData.open(dirs[0], "train")  # the training split of the epoch's shard
        self.epoch_length = 0  # batches in this process's share of the current epoch (0: not built yet)

    def host_batch(self, data: ParallelData, indices: np.ndarray) -> Batch:
        """Collate rows ``indices`` of ``data`` with the fields the methods need, in host memory."""
        src = [data.src[i] for i in indices]
        tgt = [data.tgt[i] for i in indices]
        fields = {name: [data.fields[name][i] for i in indices] for name in self.fields}
        return collate(indices, src, tgt, fields, self.pad_multiple)

    def make_batch(self, data: ParallelData, indices: np.ndarray) -> Batch:
        """:meth:`host_batch` on the training device."""
        return self.host_batch(data, indices).to(self.dist.device)

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

    def read_epoch_shard(self, progress: Progress) -> None:
        """Make ``train_data`` the training split of the shard the current epoch of ``progress`` reads
        (:func:`epoch_shard`; a run resumed part-way through an epoch goes on with the shard its checkpoint
        recorded), and log it.

        A run on one data directory goes on with it wherever it now lies (a corpus moved, or copied to a job's
        local disk): only a list of shards needs the recorded one to tell which the epoch was reading."""
        resumed = progress.shard if progress.position else ""
        if resumed and len(self.data_dirs) == 1 and Path(resumed).resolve() != self.data_dirs[0].resolve():
            logger.warning("the checkpoint stopped epoch %d part-way through %s; going on with %s, the data "
                           "directory now given", progress.epoch, resumed, self.data_dirs[0])
            resumed = ""
        shard = epoch_shard(self.data_dirs, progress.epoch, resumed)
        if self.train_data.src.prefix.parent != shard:
            del self.train_data  # one shard's lengths in memory at a time
            self.train_data = ParallelData.open(shard, "train")
        progress.shard = str(shard)
        logger.info("epoch %d | shard %d of %d: %s (%d pairs)", progress.epoch, self.data_dirs.index(shard) + 1,
                    len(self.data_dirs), shard, len(self.train_data))
        if self.dist.is_main:
            self.check_data_fingerprint(progress)

    def check_data_fingerprint(self, progress: Progress) -> None:
        """Record in ``progress`` the fingerprint of the training split the epoch reads
        (:mod:`ordo.training.fingerprint`) and, in a run resumed part-way through an epoch, warn, naming each side
        and how, when it differs from the checkpoint's: the split was changed in place since, and the checkpoint's
        place in the epoch now indexes another list of batches.

        A warning, not an error, as for a changed ``train.seed`` or ``train.max_tokens`` (ordo.api's
        ``warn_batch_changes``), which do the same to the epoch: the run can go on, only the rest of that epoch may
        skip some sentences and repeat others. Data of another vocabulary, which would make the weights wrong, is
        refused before this (``check_run_vocabulary``), and what changes with the same vocabulary is most often
        meant (pairs added or filtered, ``ordo prepare --vocab-from``): refusing would strand a preempted job that
        restarts by itself, with no means to go on."""
        now = split_fingerprint(self.train_data)
        split = self.train_data.src.prefix.with_suffix("")
        changes = fingerprint_changes(progress.data_fingerprint, now, split) if progress.position else []
        if changes:
            logger.warning("the training data changed since the checkpoint was saved (%s): epoch %d goes on from "
                           "batch %d of another list of batches (some sentences may be skipped or repeated until "
                           "the epoch ends)", "; ".join(changes), progress.epoch, progress.position)
        progress.data_fingerprint = now

    def updates(self, progress: Progress) -> Iterator[list[np.ndarray]]:
        """Groups of ``update_freq`` batches from the position saved in ``progress`` on, epoch after epoch, shard
        after shard, advancing ``progress`` as they are taken."""
        while self.tcfg.max_epochs <= 0 or progress.epoch <= self.tcfg.max_epochs:
            self.read_epoch_shard(progress)
            batches = self.epoch_batch_list(progress.epoch)
            self.epoch_length = len(batches)
            while progress.position < len(batches):
                start = progress.position
                progress.position = min(start + self.tcfg.update_freq, len(batches))
                yield batches[start : progress.position]
            progress.epoch += 1
            progress.position = 0
            del batches  # the next shard's arrays replace this shard's rather than join them

    def epochs_done(self, progress: Progress) -> bool:
        """Whether the update just done (as ``progress`` stands) was the last one of the last epoch
        (``train.max_epochs``)."""
        last_epoch = 0 < self.tcfg.max_epochs <= progress.epoch
        return last_epoch and 0 < self.epoch_length <= progress.position


def rescaled_position(position: int, saved_processes: int, processes: int) -> int:
    """The batch position in each process's share of an epoch (every ``processes``-th batch) that continues
    where ``saved_processes`` processes stood at ``position`` each (``position x saved_processes`` batches of the
    epoch done); rounded down, so that a batch is trained twice rather than left out."""
    return position * saved_processes // processes
