"""Token arrays, data.yaml, ParallelData and write_field: round trips, memory mapping, clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from ordo.data import corpus
from ordo.data.corpus import DataMeta, ParallelData, TokenArray, write_field, write_token_array
from ordo.data.vocab import Vocab
from ordo.errors import InputError

ROWS = [[5, 6, 7], [], [8], [9, 10, 11, 12, 4]]


def test_round_trip_equal_rows_and_lengths(tmp_path):
    count = write_token_array(tmp_path / "a", ROWS, vocab_size=100)
    array = TokenArray.open(tmp_path / "a")
    assert count == len(array) == len(ROWS)
    assert [array[i].tolist() for i in range(len(array))] == ROWS
    assert array.lengths.tolist() == [len(r) for r in ROWS]
    assert array.lengths.dtype == np.int32  # 4 bytes a pair: a corpus of millions keeps them in memory
    assert array[-1].tolist() == ROWS[-1]
    with pytest.raises(IndexError):
        array[len(ROWS)]


def test_idx_is_npy_of_offsets(tmp_path):
    write_token_array(tmp_path / "a", ROWS, vocab_size=100)
    offsets = np.load(tmp_path / "a.idx")
    assert offsets.dtype == np.int64
    assert offsets.tolist() == np.concatenate([[0], np.cumsum([len(r) for r in ROWS])]).tolist()


@pytest.mark.parametrize(("vocab_size", "itemsize"), [(100, 2), (65535, 2), (65536, 4), (1_000_000, 4)])
def test_dtype_follows_vocab_size(tmp_path, vocab_size, itemsize):
    rows = [[0, vocab_size - 1], [vocab_size // 2]]
    write_token_array(tmp_path / "a", rows, vocab_size=vocab_size)
    assert (tmp_path / "a.bin").stat().st_size == 3 * itemsize
    array = TokenArray.open(tmp_path / "a")
    assert array.tokens.dtype.itemsize == itemsize
    assert [array[i].tolist() for i in range(2)] == rows


def test_rows_are_memory_mapped_and_returned_as_int64_copies(tmp_path):
    write_token_array(tmp_path / "a", ROWS, vocab_size=100)
    array = TokenArray.open(tmp_path / "a")
    assert isinstance(array.tokens, np.memmap)
    assert isinstance(array.offsets, np.memmap)
    row = array[0]
    assert row.dtype == np.int64 and not isinstance(row, np.memmap)
    row[0] = 99  # a copy: the file is read-only and stays unchanged
    assert array[0].tolist() == ROWS[0]


def test_streaming_across_flushes(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "_FLUSH_TOKENS", 4)
    rows = [np.arange(i % 5, dtype=np.int64) for i in range(50)]
    assert write_token_array(tmp_path / "a", iter(rows), vocab_size=10) == 50
    array = TokenArray.open(tmp_path / "a")
    assert all(np.array_equal(array[i], rows[i]) for i in range(50))


@pytest.mark.parametrize("bad", [-1, 10])
def test_value_out_of_range_names_row_and_writes_nothing(tmp_path, monkeypatch, bad):
    monkeypatch.setattr(corpus, "_FLUSH_TOKENS", 4)
    rows = [[1, 2]] * 7 + [[3, bad]] + [[1]] * 3
    with pytest.raises(InputError, match=r"a: row 7: value"):
        write_token_array(tmp_path / "a", rows, vocab_size=10)
    assert list(tmp_path.iterdir()) == []


def test_failed_rewrite_keeps_previous_files(tmp_path):
    write_token_array(tmp_path / "a", ROWS, vocab_size=100)

    def rows():
        yield [1, 2]
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_token_array(tmp_path / "a", rows(), vocab_size=100)
    array = TokenArray.open(tmp_path / "a")
    assert [array[i].tolist() for i in range(len(array))] == ROWS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "a.idx"]


@pytest.mark.parametrize("missing", ["a.bin", "a.idx"])
def test_open_missing_file_names_it(tmp_path, missing):
    write_token_array(tmp_path / "a", ROWS, vocab_size=100)
    (tmp_path / missing).unlink()
    with pytest.raises(InputError, match=missing):
        TokenArray.open(tmp_path / "a")


def test_open_inconsistent_files(tmp_path):
    write_token_array(tmp_path / "a", ROWS, vocab_size=100)
    with open(tmp_path / "a.bin", "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(InputError, match=r"a\.bin"):
        TokenArray.open(tmp_path / "a")
    (tmp_path / "a.idx").write_bytes(b"not numpy")
    with pytest.raises(InputError, match=r"a\.idx"):
        TokenArray.open(tmp_path / "a")


def meta(**changes) -> DataMeta:
    values = {
        "src_lang": "en", "tgt_lang": "ja", "joint_vocab": True, "src_vocab": "spm.model",
        "tgt_vocab": "spm.model", "src_vocab_size": 100, "tgt_vocab_size": 100, "splits": {"train": 3},
    }
    return DataMeta(**{**values, **changes})


def test_meta_round_trip(tmp_path):
    original = meta(fields={"train": ["reorder_positions"]})
    original.save(tmp_path)
    assert DataMeta.load(tmp_path) == original
    assert meta().fields == {} and meta().schema_version == 1


def test_meta_errors_name_the_file(tmp_path):
    with pytest.raises(InputError, match="data.yaml"):
        DataMeta.load(tmp_path)
    (tmp_path / "data.yaml").write_text("src_lang: [unclosed\n")
    with pytest.raises(InputError, match="data.yaml"):
        DataMeta.load(tmp_path)
    (tmp_path / "data.yaml").write_text(yaml.safe_dump({"src_lang": "en"}))
    with pytest.raises(InputError, match="data.yaml"):
        DataMeta.load(tmp_path)
    meta().save(tmp_path)
    raw = yaml.safe_load((tmp_path / "data.yaml").read_text())
    (tmp_path / "data.yaml").write_text(yaml.safe_dump({**raw, "extra_key": 1}))
    with pytest.raises(InputError, match="extra_key"):
        DataMeta.load(tmp_path)


def data_dir(tmp_path: Path) -> Path:
    """A minimal data directory with a 3-pair train split (no SentencePiece model)."""
    src = [[4, 5], [6], [7, 8, 9]]
    tgt = [[5], [6, 7], [8]]
    write_token_array(tmp_path / "train.src", src, 100)
    write_token_array(tmp_path / "train.tgt", tgt, 100)
    meta().save(tmp_path)
    return tmp_path


def test_parallel_data_and_field(tmp_path):
    directory = data_dir(tmp_path)
    write_field(directory, "train", "positions", [[1, 2], [1], [3, 1, 2]], max_value=3)
    assert DataMeta.load(directory).fields == {"train": ["positions"]}
    pairs = ParallelData.open(directory, "train")
    assert len(pairs) == 3
    assert pairs.tgt[1].tolist() == [6, 7]
    assert pairs.fields["positions"][2].tolist() == [3, 1, 2]
    with pytest.raises(InputError, match="valid"):
        ParallelData.open(directory, "valid")


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([[1, 2], [1]], "2 rows but the source has 3"),
        ([[1, 2], [1], [1, 2, 3], [1]], "more rows"),
        ([[1, 2], [1, 1], [1, 2, 3]], "row 1 has 2 values but its source row has 1"),
        ([[1, 2], [1], [1, 2, 4]], "value 4 outside"),
    ],
)
def test_write_field_validation(tmp_path, rows, message):
    directory = data_dir(tmp_path)
    with pytest.raises(InputError, match=message):
        write_field(directory, "train", "positions", rows, max_value=3)
    assert DataMeta.load(directory).fields == {}
    assert not list(directory.glob("train.field.*"))


def test_write_field_rejects_bad_name_and_split(tmp_path):
    directory = data_dir(tmp_path)
    with pytest.raises(InputError, match="field name"):
        write_field(directory, "train", "../x", [[1, 2], [1], [1, 2, 3]], max_value=3)
    with pytest.raises(InputError, match="test"):
        write_field(directory, "test", "x", [], max_value=3)


def test_vocab_load_errors(tmp_path):
    with pytest.raises(InputError, match="missing.model"):
        Vocab.load(tmp_path / "missing.model")
    (tmp_path / "bad.model").write_bytes(b"\x00garbage")
    with pytest.raises(InputError, match="bad.model"):
        Vocab.load(tmp_path / "bad.model")
