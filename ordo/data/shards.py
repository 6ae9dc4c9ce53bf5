"""A training corpus in several data directories (shards) with one vocabulary, read one shard per epoch.

At WMT scale the training pairs come in parts prepared apart (on other machines, or later, such as
back-translations). Each part is a data directory of its own (:mod:`ordo.data.corpus`); every one after the
first is prepared with ``ordo prepare --vocab-from FIRST`` (:func:`copy_vocabs`), which encodes it with the
first one's vocabularies and so records the same :func:`vocab_digest` in its ``data.yaml``.

``ordo train --data DIR1:DIR2:...`` trains on them as fairseq's ``data-bin1:data-bin2`` does: epoch e (1-based)
reads the training split of shard (e - 1) mod n (:func:`epoch_shard`), and the first directory gives the
validation split and the vocabularies. Only one shard's training split is open at a time, so the loader's own
memory (lengths and the epoch's order, 12 bytes a pair) follows the largest shard, not the whole corpus.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path

from ordo.data.corpus import META_NAME, DataMeta, ParallelData
from ordo.data.lattice.corpus import LatticeEncoder
from ordo.data.textio import copy_tree_atomically
from ordo.data.vocab import TokenVocab, Vocab, load_vocab
from ordo.errors import ConfigError, InputError

__all__ = ["copy_vocabs", "data_dirs", "epoch_shard", "shard_metas", "vocab_digest"]

SHARD_SEPARATOR = ":"  # between the directories of a sharded ``data`` setting, as in fairseq's data-bin1:data-bin2


def data_dirs(data: str) -> list[Path]:
    """The data directories a ``data`` setting names: one, or several joined by ``:``.

    Args:
        data: ``DIR`` or ``DIR1:DIR2:...``.

    Returns:
        The directories in the order given (empty parts left out).
    """
    return [Path(part) for part in data.split(SHARD_SEPARATOR) if part]


def vocab_digest(data_dir: Path, meta: DataMeta) -> str:
    """SHA-256 of what decides a directory's piece ids: the vocabulary files, byte for byte (every file of a
    lattice corpus's lattice directory too), and whether one model serves both sides.

    A run directory's copies (:func:`ordo.api.train`) give the same digest as the data directory's files.

    Args:
        data_dir: a data directory (or a run directory, which keeps its ``data.yaml``).
        meta: its ``data.yaml``.

    Returns:
        The hex digest.

    Raises:
        InputError: naming a vocabulary file that is missing.
    """
    digest = hashlib.sha256(f"joint={meta.joint_vocab}".encode())
    lattice_dir = data_dir / meta.src_lattice if meta.src_lattice else None
    files = [("src", data_dir / meta.src_vocab), ("tgt", data_dir / meta.tgt_vocab)]
    if lattice_dir is not None:
        files += [(str(p.relative_to(lattice_dir)), p) for p in sorted(lattice_dir.rglob("*")) if p.is_file()]
    for role, path in files:
        if not path.is_file():
            raise InputError(f"{path}: no such file (a vocabulary {data_dir / META_NAME} names)")
        digest.update(f"\n{role}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _recorded_digest(data_dir: Path, meta: DataMeta) -> str:
    """The digest ``data.yaml`` records, or for a directory prepared before it did, the one of its files."""
    return meta.vocab_sha256 or vocab_digest(data_dir, meta)


def shard_metas(dirs: Sequence[Path]) -> list[DataMeta]:
    """Read and check the ``data.yaml`` of every shard of a training corpus.

    Args:
        dirs: the data directories, the first giving the vocabularies.

    Returns:
        Their metadata, in order.

    Raises:
        ConfigError: when ``dirs`` is empty.
        InputError: naming the directory that has no ``data.yaml``, no training split, or a vocabulary other
            than the first directory's, or the file of a training split's array that is missing or disagrees with
            ``data.yaml``.
    """
    if not dirs:
        raise ConfigError("data: no data directory given (use --data DIR or data: in the config)")
    metas = [DataMeta.load(data_dir) for data_dir in dirs]
    expected = _recorded_digest(dirs[0], metas[0])
    for data_dir, meta in zip(dirs, metas):
        if "train" not in meta.splits:
            raise InputError(f"{data_dir}: no training split (have: {', '.join(meta.splits) or 'none'}); every "
                             f"directory of a sharded data setting is a training shard")
        if _recorded_digest(data_dir, meta) != expected:
            raise InputError(f"{data_dir}: its vocabulary differs from that of {dirs[0]}, the first shard; prepare "
                             f"every shard with `ordo prepare --vocab-from {dirs[0]}`")
        ParallelData.open(data_dir, "train")  # a missing or short array fails now, not at the epoch that reads it
    return metas


def epoch_shard(dirs: Sequence[Path], epoch: int, resumed: str = "") -> Path:
    """The shard whose training split epoch ``epoch`` reads: shard (epoch - 1) mod n, or ``resumed``.

    Args:
        dirs: the shards, in order.
        epoch: the 1-based epoch.
        resumed: the shard a checkpoint recorded for this epoch when it stopped part-way through it ("" for
            none): the epoch goes on with that shard, so that its saved batch position means the same batches,
            even when the list has changed since (a shard added, say; the new list counts from the next epoch).

    Returns:
        One of ``dirs``.

    Raises:
        ConfigError: when ``resumed`` is not among ``dirs``.
    """
    if resumed:
        found = [data_dir for data_dir in dirs if data_dir.resolve() == Path(resumed).resolve()]
        if not found:
            raise ConfigError(f"data: the checkpoint stopped epoch {epoch} part-way through shard {resumed}, which "
                              f"the data setting no longer lists; list it again to resume")
        return found[0]
    return dirs[(epoch - 1) % len(dirs)]


def copy_vocabs(source_dir: Path, out: Path) -> tuple[Vocab | TokenVocab, Vocab, LatticeEncoder | None]:
    """Copy the vocabularies of a prepared directory into ``out`` and load the copies, for ``ordo prepare
    --vocab-from``: a shard encoded with them gets the same :func:`vocab_digest`.

    Args:
        source_dir: a data directory (or a run directory) whose ``data.yaml`` names its vocabularies.
        out: the data directory being prepared; the files keep their names relative to it.

    Returns:
        ``(src_vocab, tgt_vocab, lattice)``: the same object twice for a joint model; ``lattice`` the
        segmenters and source vocabulary of a lattice corpus, else None.

    Raises:
        InputError: naming a file of ``source_dir`` that is missing or invalid.
    """
    meta = DataMeta.load(source_dir)
    names = [meta.tgt_vocab] + ([] if meta.src_lattice else [meta.src_vocab])
    for name in names:
        if not (source_dir / name).is_file():
            raise InputError(f"{source_dir / name}: no such file (a vocabulary {source_dir / META_NAME} names)")
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_dir / name, out / name)
    lattice = None
    if meta.src_lattice:
        copy_tree_atomically(source_dir / meta.src_lattice, out / meta.src_lattice)
        lattice = LatticeEncoder.load(out / meta.src_lattice)
    tgt_vocab = Vocab.load(out / meta.tgt_vocab)
    if meta.joint_vocab:
        return tgt_vocab, tgt_vocab, None
    src_vocab = lattice.vocab if lattice is not None else load_vocab(out / meta.src_vocab)
    return src_vocab, tgt_vocab, lattice
