"""Binarized corpora: memory-mapped token arrays and the data directory ``ordo prepare`` writes.

A token array ``<prefix>`` is two files:

- ``<prefix>.bin``: every row's values concatenated, raw little-endian; uint16 when the values are below
  65535, else int32 (int64 beyond that). The width is not stored: it is ``bin size / total tokens``.
- ``<prefix>.idx``: a ``.npy`` int64 vector of n + 1 offsets; row i is ``bin[offsets[i]:offsets[i+1]]``.

Both are written streaming and renamed into place only when complete, and read with ``mmap``, so corpora
larger than memory work. A data directory holds, per split (``train``, ``valid``, ``test``):

- ``{split}.src.bin/.idx``, ``{split}.tgt.bin/.idx``: SentencePiece ids, no BOS/EOS;
- ``{split}.src.txt``, ``{split}.tgt.txt``: the raw text of the kept pairs (references for BLEU);
- ``{split}.field.{name}.bin/.idx``: optional per-source-token fields added by methods;

plus the SentencePiece model(s) and ``data.yaml`` (:class:`DataMeta`), written last; it records a digest of the
vocabulary files, which the shards of one training corpus share (:mod:`ordo.data.shards`). A lattice corpus
(paper 002) has edge ids as its source rows, the fields ``lattice_start``/``lattice_end`` and a
``lattice/`` directory (:mod:`ordo.data.lattice.corpus`) holding the source vocabulary.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import yaml

from ordo.data.textio import atomic_write
from ordo.data.vocab import TokenVocab, Vocab, load_vocab
from ordo.errors import InputError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "DataMeta",
    "ParallelData",
    "TokenArray",
    "TokenArrayWriter",
    "Vocab",
    "add_field_name",
    "load_vocabs",
    "token_dtype",
    "write_field",
    "write_field_array",
    "write_token_array",
]

META_NAME = "data.yaml"
LATTICE_DIR = "lattice"  # a lattice corpus's segmenters and source vocabulary (ordo.data.lattice.corpus)
SCHEMA_VERSION = 1
_FLUSH_TOKENS = 1 << 20  # values buffered before a write to the .bin file
_FIELD_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def token_dtype(vocab_size: int) -> np.dtype:
    """The storage dtype for values in ``[0, vocab_size)``.

    Args:
        vocab_size: exclusive upper bound of the values.

    Returns:
        Little-endian uint16 when ``vocab_size <= 65535``, int32 up to 2**31 - 1, else int64.
    """
    if vocab_size <= 65535:
        return np.dtype("<u2")
    if vocab_size <= np.iinfo(np.int32).max:
        return np.dtype("<i4")
    return np.dtype("<i8")


def _bin_path(prefix: Path) -> Path:
    return prefix.with_name(prefix.name + ".bin")


def _idx_path(prefix: Path) -> Path:
    return prefix.with_name(prefix.name + ".idx")


class TokenArrayWriter:
    """Streams rows into ``<prefix>.bin/.idx``; the files appear only when the ``with`` block succeeds.

    Use as ``with TokenArrayWriter(prefix, vocab_size) as writer: writer.add(row)``. Memory use is a
    bounded buffer: offsets go to a temporary file and are copied into the ``.idx`` at the end.

    Args:
        prefix: output path without extension.
        vocab_size: exclusive upper bound of the values; picks the dtype (see :func:`token_dtype`).
    """

    def __init__(self, prefix: Path, vocab_size: int) -> None:
        self.prefix = Path(prefix)
        self.vocab_size = int(vocab_size)
        self.dtype = token_dtype(self.vocab_size)
        self.count = 0  # rows added
        self._total = 0  # values added
        self._values: list[int] = []
        self._ends: list[int] = []
        self._stack = ExitStack()
        self._bin: IO[bytes] | None = None
        self._offsets: IO[bytes] | None = None

    def __enter__(self) -> Self:
        self._bin = self._stack.enter_context(atomic_write(_bin_path(self.prefix), "wb"))
        self._offsets = self._stack.enter_context(tempfile.TemporaryFile(dir=self.prefix.parent))
        np.zeros(1, dtype="<i8").tofile(self._offsets)
        return self

    def add(self, row: Sequence[int] | np.ndarray) -> None:
        """Append one row of non-negative ints below ``vocab_size``."""
        self._values.extend(row.tolist() if isinstance(row, np.ndarray) else row)
        self._total += len(row)
        self._ends.append(self._total)
        self.count += 1
        if len(self._values) >= _FLUSH_TOKENS:
            self._flush()

    def _flush(self) -> None:
        """Check and write the buffered values and offsets."""
        assert self._bin is not None and self._offsets is not None, "use TokenArrayWriter in a with block"
        values = np.asarray(self._values, dtype=np.int64)
        bad = np.flatnonzero((values < 0) | (values >= self.vocab_size))
        if bad.size:
            position = self._total - values.size + int(bad[0])  # index in the whole array
            row = self.count - len(self._ends) + int(np.searchsorted(self._ends, position, side="right"))
            raise InputError(f"{self.prefix}: row {row}: value {values[bad[0]]} outside [0, {self.vocab_size})")
        values.astype(self.dtype).tofile(self._bin)
        np.asarray(self._ends, dtype="<i8").tofile(self._offsets)
        self._values, self._ends = [], []

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        try:
            if exc_type is None:
                self._flush()
                self._write_index()
        except BaseException as err:
            self._stack.__exit__(type(err), err, err.__traceback__)
            raise
        return bool(self._stack.__exit__(exc_type, exc, tb))

    def _write_index(self) -> None:
        """Write the ``.idx`` (.npy header + the spooled offsets), before the ``.bin`` is renamed."""
        assert self._offsets is not None
        self._offsets.seek(0)
        header = {"descr": "<i8", "fortran_order": False, "shape": (self.count + 1,)}
        with atomic_write(_idx_path(self.prefix), "wb") as handle:
            np.lib.format.write_array_header_1_0(handle, header)
            shutil.copyfileobj(self._offsets, handle)


def write_token_array(prefix: Path, sequences: Iterable[Sequence[int]], vocab_size: int) -> int:
    """Write rows of ints to ``<prefix>.bin`` and ``<prefix>.idx``, streaming and atomically.

    Args:
        prefix: output path without extension; its folder is created.
        sequences: the rows (piece ids, or any per-token non-negative ints).
        vocab_size: exclusive upper bound of the values; uint16 storage when ``<= 65535``, else int32.

    Returns:
        The number of rows written.

    Raises:
        InputError: when a value is negative or not below ``vocab_size`` (nothing is written then).
    """
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with TokenArrayWriter(prefix, vocab_size) as writer:
        for row in sequences:
            writer.add(row)
    return writer.count


class TokenArray:
    """Read-only, memory-mapped rows of a token array written by :func:`write_token_array`.

    Args:
        tokens: the flat values (a ``np.memmap`` when opened from disk).
        offsets: int64 row boundaries, length n + 1.
        prefix: the path the array was opened from (for messages).
    """

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray, prefix: Path) -> None:
        self.tokens = tokens
        self.offsets = offsets
        self.prefix = Path(prefix)
        self.lengths: np.ndarray = np.diff(offsets).astype(np.int32)  # (n,) values per row: 4 bytes each

    @classmethod
    def open(cls, prefix: Path) -> TokenArray:
        """Memory-map ``<prefix>.bin`` and ``<prefix>.idx``.

        Args:
            prefix: path without extension.

        Returns:
            The array; rows are read from disk on access.

        Raises:
            InputError: naming the file when one is missing or unreadable, or when the two disagree.
        """
        prefix = Path(prefix)
        bin_path, idx_path = _bin_path(prefix), _idx_path(prefix)
        for path in (idx_path, bin_path):
            if not path.is_file():
                raise InputError(f"{path}: no such file (run `ordo prepare`)")
        offsets = _load_offsets(idx_path)
        dtype = _infer_dtype(bin_path, int(offsets[-1]), idx_path)
        if offsets[-1] == 0:
            tokens = np.zeros(0, dtype=dtype)
        else:
            tokens = np.memmap(bin_path, dtype=dtype, mode="r")
        return cls(tokens, offsets, prefix)

    def __len__(self) -> int:
        """Number of rows."""
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> np.ndarray:
        """Row ``index`` as a fresh int64 array (negative indices count from the end)."""
        count = len(self)
        i = int(index)
        if i < 0:
            i += count
        if not 0 <= i < count:
            raise IndexError(f"{self.prefix}: row {index} out of range ({count} rows)")
        return np.array(self.tokens[self.offsets[i] : self.offsets[i + 1]], dtype=np.int64)

    def __iter__(self) -> Iterator[np.ndarray]:
        """Every row in order."""
        return (self[i] for i in range(len(self)))


def _load_offsets(idx_path: Path) -> np.ndarray:
    """The offsets vector of an ``.idx`` file, memory-mapped and checked."""
    try:
        offsets = np.load(idx_path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise InputError(f"{idx_path}: not a token-array index ({err})") from None
    if offsets.ndim != 1 or offsets.dtype != np.int64 or len(offsets) == 0:
        raise InputError(f"{idx_path}: expected a 1-d int64 offsets vector, got {offsets.dtype} {offsets.shape}")
    if offsets[0] != 0 or (len(offsets) > 1 and bool(np.any(np.diff(offsets) < 0))):
        raise InputError(f"{idx_path}: offsets must start at 0 and never decrease")
    return offsets


def _infer_dtype(bin_path: Path, total: int, idx_path: Path) -> np.dtype:
    """The value width of ``bin_path`` from its size and the ``total`` number of values."""
    size = bin_path.stat().st_size
    if total == 0:
        if size:
            raise InputError(f"{bin_path}: {size} bytes but {idx_path} says it holds no values")
        return np.dtype("<u2")
    widths: dict[int, np.dtype] = {2: np.dtype("<u2"), 4: np.dtype("<i4"), 8: np.dtype("<i8")}
    if size % total or size // total not in widths:
        raise InputError(f"{bin_path}: {size} bytes do not match the {total} values {idx_path} indexes")
    return widths[size // total]


@dataclass
class DataMeta:
    """What ``ordo prepare`` wrote into a data directory (``data.yaml``)."""

    src_lang: str  # source language code, e.g. "en"
    tgt_lang: str  # target language code
    joint_vocab: bool  # one SentencePiece model for both sides
    src_vocab: str  # source vocabulary, relative to the data dir ("spm.model", "spm.src.model", "lattice/src.tokens")
    tgt_vocab: str  # target SentencePiece model, relative to the data dir
    src_vocab_size: int  # pieces in the source model, special ones included
    tgt_vocab_size: int  # pieces in the target model
    splits: dict[str, int] = field(default_factory=dict)  # sentence pairs per split
    fields: dict[str, list[str]] = field(default_factory=dict)  # extra per-token fields per split
    src_lattice: str = ""  # lattice directory (segmenters, models) when the source side is lattices (paper 002)
    vocab_sha256: str = ""  # digest of the vocabulary files: shards of one corpus share it (ordo.data.shards)
    schema_version: int = SCHEMA_VERSION  # layout version of the data directory

    def save(self, data_dir: Path) -> None:
        """Write ``data_dir/data.yaml`` atomically.

        Args:
            data_dir: the data directory (created if missing).
        """
        with atomic_write(Path(data_dir) / META_NAME) as handle:
            yaml.safe_dump(asdict(self), handle, sort_keys=False, allow_unicode=True)

    @classmethod
    def load(cls, data_dir: Path) -> DataMeta:
        """Read ``data_dir/data.yaml``.

        Args:
            data_dir: a directory written by ``ordo prepare``.

        Returns:
            The metadata.

        Raises:
            InputError: naming the file when it is missing, not YAML, has unknown or missing keys, or
                comes from a newer ordo.
        """
        path = Path(data_dir) / META_NAME
        if not path.is_file():
            raise InputError(f"{path}: no such file; is {data_dir} a directory written by `ordo prepare`?")
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            raise InputError(f"{path}: not valid YAML ({err})") from None
        return cls._from_raw(raw, path)

    @classmethod
    def _from_raw(cls, raw: Any, path: Path) -> DataMeta:
        """Check the parsed mapping and build the dataclass."""
        if not isinstance(raw, dict):
            raise InputError(f"{path}: expected a mapping of data settings")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise InputError(f"{path}: unknown keys {unknown}")
        version = raw.get("schema_version", SCHEMA_VERSION)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise InputError(f"{path}: schema_version {version!r} is newer than this ordo reads ({SCHEMA_VERSION})")
        try:
            meta = cls(**raw)
            meta.splits = {str(k): int(v) for k, v in (meta.splits or {}).items()}
            meta.fields = {str(k): [str(n) for n in v] for k, v in (meta.fields or {}).items()}
        except (TypeError, ValueError, AttributeError) as err:
            raise InputError(f"{path}: {err}") from None
        return meta


class ParallelData:
    """One split of a data directory: source and target token arrays plus any extra fields.

    Args:
        src: source piece ids per pair.
        tgt: target piece ids per pair.
        fields: per-source-token fields by name (same row lengths as ``src``).
        meta: the directory's metadata.
    """

    def __init__(self, src: TokenArray, tgt: TokenArray, fields: dict[str, TokenArray], meta: DataMeta) -> None:
        self.src = src
        self.tgt = tgt
        self.fields = fields
        self.meta = meta

    @classmethod
    def open(cls, data_dir: Path, split: str) -> ParallelData:
        """Memory-map split ``split`` of ``data_dir``.

        Args:
            data_dir: a directory written by ``ordo prepare``.
            split: e.g. ``"train"``, ``"valid"`` or ``"test"``.

        Returns:
            The split.

        Raises:
            InputError: when the split or one of its files is missing or the row counts disagree.
        """
        data_dir = Path(data_dir)
        meta = DataMeta.load(data_dir)
        if split not in meta.splits:
            raise InputError(f"{data_dir / META_NAME}: no split {split!r} (have: {', '.join(meta.splits)})")
        src = TokenArray.open(data_dir / f"{split}.src")
        tgt = TokenArray.open(data_dir / f"{split}.tgt")
        if len(src) != len(tgt) or len(src) != meta.splits[split]:
            raise InputError(
                f"{data_dir}: split {split} has {len(src)} source rows, {len(tgt)} target rows, "
                f"data.yaml says {meta.splits[split]}; run `ordo prepare` again"
            )
        extra = {name: TokenArray.open(data_dir / f"{split}.field.{name}") for name in meta.fields.get(split, [])}
        for array in extra.values():
            if len(array) != len(src):
                raise InputError(f"{array.prefix}: {len(array)} rows but the source has {len(src)}")
        return cls(src, tgt, extra, meta)

    def __len__(self) -> int:
        """Number of sentence pairs."""
        return len(self.src)


def write_field(data_dir: Path, split: str, name: str, sequences: Iterable[Sequence[int]], max_value: int) -> None:
    """Add a per-source-token field to a split and record it in ``data.yaml``.

    Args:
        data_dir: a directory written by ``ordo prepare``.
        split: the split the rows belong to.
        name: the field's name, e.g. ``"reorder_positions"`` (letters, digits, underscores).
        sequences: one row per sentence pair, each as long as the pair's source row (no EOS).
        max_value: the largest value any row may hold (picks the storage dtype).

    Raises:
        InputError: for a bad name, a missing split, a row count or row length that differs from the
            source, or a value outside ``[0, max_value]``; the field is not written then.
    """
    data_dir = Path(data_dir)
    meta = DataMeta.load(data_dir)
    if split not in meta.splits:
        raise InputError(f"{data_dir / META_NAME}: no split {split!r} (have: {', '.join(meta.splits)})")
    write_field_array(data_dir, split, name, sequences, max_value)
    add_field_name(meta, split, name)
    meta.save(data_dir)


def write_field_array(
    data_dir: Path, split: str, name: str, sequences: Iterable[Sequence[int]], max_value: int
) -> None:
    """Write the token array of a per-source-token field, ``{split}.field.{name}.bin/.idx``, without touching
    ``data.yaml`` (:func:`write_field` records it there; ``ordo prepare`` records every field at once, last).

    Args:
        data_dir: a directory holding the split's source array ``{split}.src.bin/.idx``.
        split: the split the rows belong to.
        name: the field's name (letters, digits, underscores).
        sequences: one row per sentence pair, each as long as the pair's source row (no EOS).
        max_value: the largest value any row may hold (picks the storage dtype).

    Raises:
        InputError: for a bad name, a missing source array, a row count or row length that differs from the
            source, or a value outside ``[0, max_value]``; the field is not written then.
    """
    if not _FIELD_NAME.match(name):
        raise InputError(f"field name {name!r}: use letters, digits and underscores only")
    lengths = TokenArray.open(Path(data_dir) / f"{split}.src").lengths
    prefix = Path(data_dir) / f"{split}.field.{name}"
    write_token_array(prefix, _checked_rows(sequences, lengths, prefix), max_value + 1)


def add_field_name(meta: DataMeta, split: str, name: str) -> None:
    """Record field ``name`` of ``split`` in ``meta`` (once)."""
    names = meta.fields.setdefault(split, [])
    if name not in names:
        names.append(name)


def _checked_rows(
    sequences: Iterable[Sequence[int]], lengths: np.ndarray, prefix: Path
) -> Iterator[Sequence[int]]:
    """Yield ``sequences`` unchanged, raising InputError when a row's length or the row count is off."""
    count = 0
    for count, row in enumerate(sequences, start=1):
        if count > len(lengths):
            raise InputError(f"{prefix}: more rows than the {len(lengths)} source rows")
        if len(row) != lengths[count - 1]:
            raise InputError(
                f"{prefix}: row {count - 1} has {len(row)} values but its source row has {lengths[count - 1]} pieces"
            )
        yield row
    if count != len(lengths):
        raise InputError(f"{prefix}: {count} rows but the source has {len(lengths)}")


def load_vocabs(data_dir: Path, meta: DataMeta | None = None) -> tuple[Vocab | TokenVocab, Vocab | TokenVocab]:
    """The source and target vocabularies of a data directory or a run (the same object when both sides name
    one file).

    Args:
        data_dir: a directory written by ``ordo prepare``, or a run directory (which keeps its data.yaml).
        meta: its ``data.yaml``, when already read.

    Returns:
        ``(src_vocab, tgt_vocab)``.

    Raises:
        InputError: when ``data.yaml`` or a model file is missing or invalid.
    """
    data_dir = Path(data_dir)
    meta = meta or DataMeta.load(data_dir)
    src = load_vocab(data_dir / meta.src_vocab)
    tgt = src if meta.tgt_vocab == meta.src_vocab else load_vocab(data_dir / meta.tgt_vocab)
    return src, tgt
