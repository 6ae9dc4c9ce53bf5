"""Shards of one training corpus: ``prepare`` with ``vocab_from``, the vocabulary digest, which shard an epoch
reads, and the checks that name a shard that does not fit."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ordo.config import from_dict
from ordo.data.corpus import DataMeta, ParallelData
from ordo.data.prepare import PrepareConfig, prepare
from ordo.data.shards import data_dirs, epoch_shard, shard_metas, vocab_digest
from ordo.data.textio import read_lines
from ordo.data.vocab import Vocab
from ordo.errors import ConfigError, InputError


def test_vocab_from_copies_the_models_and_every_shard_records_one_digest(sharded_data):
    first, *others = sharded_data
    first_meta = DataMeta.load(first)
    assert first_meta.vocab_sha256 == vocab_digest(first, first_meta)
    for shard in others:
        meta = DataMeta.load(shard)
        assert (shard / meta.src_vocab).read_bytes() == (first / first_meta.src_vocab).read_bytes()
        assert meta.vocab_sha256 == first_meta.vocab_sha256
        assert meta.joint_vocab and list(meta.splits) == ["train"]


def test_a_shard_is_encoded_with_the_first_shards_model(sharded_data):
    first, second = sharded_data[:2]
    vocab = Vocab.load(first / DataMeta.load(first).src_vocab)
    train = ParallelData.open(second, "train")
    sources = read_lines(second / "train.src.txt")
    assert [train.src[i].tolist() for i in range(5)] == [vocab.encode(line) for line in sources[:5]]


def test_separate_vocabularies_are_copied_with_their_names(sharded_data, tmp_path):
    text = sharded_data[1] / "train"
    common = {"train_src": f"{text}.src.txt", "train_tgt": f"{text}.tgt.txt", "vocab_size": 150}
    separate = prepare(PrepareConfig(**common, out=str(tmp_path / "separate"), joint_vocab=False), progress=False)
    shard = prepare(PrepareConfig(**common, out=str(tmp_path / "shard"), vocab_from=str(tmp_path / "separate")),
                    progress=False)
    assert not shard.joint_vocab and (shard.src_vocab, shard.tgt_vocab) == (separate.src_vocab, separate.tgt_vocab)
    assert shard.vocab_sha256 == separate.vocab_sha256 != DataMeta.load(sharded_data[0]).vocab_sha256


@pytest.mark.parametrize("changes, message", [
    ({"vocab_from": "{out}"}, "is the output directory"),
    ({"lattice": {"segmenters": ["chars"]}}, "leave lattice out"),
])
def test_vocab_from_the_output_directory_or_with_a_lattice_is_refused(sharded_data, tmp_path, changes, message):
    out = tmp_path / "out"
    raw = {"train_src": str(sharded_data[1] / "train.src.txt"), "train_tgt": str(sharded_data[1] / "train.tgt.txt"),
           "out": str(out), "vocab_from": str(sharded_data[0]), **changes}
    raw["vocab_from"] = raw["vocab_from"].format(out=out)
    with pytest.raises(ConfigError, match=message):
        prepare(from_dict(PrepareConfig, raw), progress=False)


def test_vocab_from_a_directory_without_data_yaml_fails_before_reading_the_corpus(tmp_path):
    cfg = PrepareConfig(train_src=str(tmp_path / "missing.src"), train_tgt=str(tmp_path / "missing.tgt"),
                        out=str(tmp_path / "out"), vocab_from=str(tmp_path))
    with pytest.raises(InputError, match=re.escape(str(tmp_path / "data.yaml"))):
        prepare(cfg, progress=False)


def test_vocab_from_a_directory_without_its_model_fails_before_reading_the_corpus(sharded_data, tmp_path):
    """Before, the corpus was read and checked first, and the output directory made."""
    source = tmp_path / "source"
    shutil.copytree(sharded_data[0], source)
    (source / "spm.model").unlink()
    cfg = PrepareConfig(train_src=str(tmp_path / "missing.src"), train_tgt=str(tmp_path / "missing.tgt"),
                        out=str(tmp_path / "out"), vocab_from=str(source))
    with pytest.raises(InputError, match=f"{re.escape(str(source / 'spm.model'))}: no such file"):
        prepare(cfg, progress=False)
    assert not (tmp_path / "out").exists()


def test_data_setting_splits_on_colons():
    assert data_dirs("a") == [Path("a")]
    assert data_dirs("a:b/c::d") == [Path("a"), Path("b/c"), Path("d")]


def test_epoch_e_reads_shard_e_minus_1_mod_n_and_a_resumed_epoch_its_recorded_shard(tmp_path):
    dirs = [tmp_path / name for name in ("a", "b", "c")]
    assert [epoch_shard(dirs, epoch).name for epoch in range(1, 8)] == ["a", "b", "c", "a", "b", "c", "a"]
    grown = [*dirs, tmp_path / "d"]  # a shard added while epoch 4 (shard a) was under way
    assert epoch_shard(grown, 4, str(tmp_path / "a")) == tmp_path / "a"
    assert epoch_shard(grown, 5) == tmp_path / "a"  # the new list counts from the next epoch
    with pytest.raises(ConfigError, match=re.escape(f"shard {tmp_path / 'z'}")):
        epoch_shard(dirs, 2, str(tmp_path / "z"))


def test_shard_metas_name_a_shard_without_a_training_split(sharded_data, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(sharded_data[0], broken)
    meta = DataMeta.load(broken)
    meta.splits.pop("train")
    meta.save(broken)
    with pytest.raises(InputError, match=f"{re.escape(str(broken))}: no training split"):
        shard_metas([sharded_data[0], broken])


def test_a_shard_prepared_before_digests_were_recorded_is_checked_by_its_files(sharded_data, tmp_path):
    older = tmp_path / "older"
    shutil.copytree(sharded_data[1], older)
    meta = DataMeta.load(older)
    meta.vocab_sha256 = ""
    meta.save(older)
    assert len(shard_metas([sharded_data[0], older])) == 2
    (older / meta.src_vocab).write_bytes((older / meta.src_vocab).read_bytes() + b"\0")
    with pytest.raises(InputError, match=f"{re.escape(str(older))}: its vocabulary differs"):
        shard_metas([sharded_data[0], older])


def test_a_lattice_corpus_shares_its_lattice_directory(tmp_path):
    from ordo.data.lattice.corpus import LatticeConfig
    from ordo.data.synthetic import write_corpus

    text = write_corpus(tmp_path / "text", {"first": 200, "second": 150}, seed=1)
    first = prepare(PrepareConfig(train_src=str(text["first"][0]), train_tgt=str(text["first"][1]),
                                  out=str(tmp_path / "first"), vocab_size=100,
                                  lattice=LatticeConfig(segmenters=["spm:50", "spm:80"])), progress=False)
    second = prepare(PrepareConfig(train_src=str(text["second"][0]), train_tgt=str(text["second"][1]),
                                   out=str(tmp_path / "second"), vocab_from=str(tmp_path / "first")), progress=False)
    assert second.vocab_sha256 == first.vocab_sha256 and second.src_lattice == first.src_lattice
    assert second.fields == {"train": ["lattice_start", "lattice_end"]}
    assert len(shard_metas([tmp_path / "first", tmp_path / "second"])) == 2


@pytest.mark.parametrize("missing", ["train.tgt.bin", "train.src.idx"])
def test_shard_metas_name_a_shard_whose_training_arrays_are_missing(sharded_data, tmp_path, missing):
    """Before, the run started and stopped at the epoch that reached the shard, maybe hours later."""
    broken = tmp_path / "broken"
    shutil.copytree(sharded_data[1], broken)
    (broken / missing).unlink()
    with pytest.raises(InputError, match=f"{re.escape(str(broken / missing))}: no such file"):
        shard_metas([sharded_data[0], broken])


def test_shard_metas_name_a_shard_whose_arrays_disagree_with_its_data_yaml(sharded_data, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(sharded_data[1], broken)
    meta = DataMeta.load(broken)
    meta.splits["train"] += 1
    meta.save(broken)
    with pytest.raises(InputError, match=f"{re.escape(str(broken))}: split train has"):
        shard_metas([sharded_data[0], broken])
