"""Lattice construction (paper 002 §3): edges, spans, segmenters, vocabulary, ``ordo prepare``."""

from __future__ import annotations

import logging
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from ordo.cli import main
from ordo.data.corpus import DataMeta, ParallelData, load_vocabs
from ordo.data.lattice.corpus import LatticeConfig, LatticeEncoder
from ordo.data.lattice.graph import FIELD_END, FIELD_START, SegmentationMismatch, build_lattice
from ordo.data.lattice.segmenters import check_specs, load_segmenter
from ordo.data.prepare import PrepareConfig, prepare
from ordo.data.textio import read_lines
from ordo.data.vocab import UNK_ID, TokenVocab, Vocab
from ordo.errors import ConfigError, InputError

WORDS = ["cat", "dog", "bird", "sees", "likes", "the", "a", "big", "small", "red", "house", "tree", "runs", "eats"]
CHINESE = ["贸易发展局副总裁在香港说。", "我们今天去北京大学参观。", "他喜欢吃苹果和香蕉。", "中国经济发展很快。",
           "这是一个 测试 句子。", "发展中国家的贸易增长了。"]


def write_corpus(folder: Path, sources: list[str], name: str = "train") -> dict[str, str]:
    """Write sources and reversed, capitalised targets; returns PrepareConfig file keys."""
    folder.mkdir(parents=True, exist_ok=True)
    targets = [" ".join(w.capitalize() for w in reversed(s.split())) or "x" for s in sources]
    (folder / f"{name}.src").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    (folder / f"{name}.tgt").write_text("".join(t + "\n" for t in targets), encoding="utf-8")
    return {f"{name}_src": str(folder / f"{name}.src"), f"{name}_tgt": str(folder / f"{name}.tgt")}


def english(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9))) for _ in range(count)]


@pytest.fixture
def corpus(tmp_path: Path) -> dict[str, str]:
    """300 training and 30 validation pairs of the reverse-and-capitalise task."""
    return {**write_corpus(tmp_path / "text", english(300, 1)), **write_corpus(tmp_path / "text", english(30, 2), "valid")}


def test_lattice_deduplicates_edges_orders_them_and_counts_spans_in_minimum_units():
    lattice = build_lattice([["ab", "c", "de"], ["a", "bc", "de"], ["abc", "d", "e"]])
    edges = list(zip(lattice.starts, lattice.ends, lattice.tokens))
    # boundaries of any segmentation: after a, b, c, d, e -> the elements are the 5 characters
    assert edges == [(0, 1, "a"), (0, 2, "ab"), (0, 3, "abc"), (1, 3, "bc"), (2, 3, "c"), (3, 4, "d"),
                     (3, 5, "de"), (4, 5, "e")]
    assert lattice.num_nodes == 6


def test_elements_are_the_minimum_units_of_the_segmentations():
    lattice = build_lattice([["▁the", "▁cats"], ["▁the", "▁cat", "s"]])
    # boundaries at offsets 0, 4, 8, 9: three elements, "▁the" "▁cat" "s"
    assert list(zip(lattice.starts, lattice.ends, lattice.tokens)) == [(0, 1, "▁the"), (1, 2, "▁cat"),
                                                                      (1, 3, "▁cats"), (2, 3, "s")]


def test_one_segmentation_gives_its_tokens_in_order_with_one_element_each():
    tokens = ["▁a", "▁big", "▁do", "g", "▁a"]  # a repeated token at another span stays
    lattice = build_lattice([tokens])
    assert lattice.tokens == tokens
    assert lattice.starts == list(range(5)) and lattice.ends == list(range(1, 6))


def test_segmentations_of_different_text_are_rejected():
    with pytest.raises(SegmentationMismatch, match="segmentation 2"):
        build_lattice([["ab", "c"], ["a", "b"]])


def test_segmenter_specs_are_checked():
    check_specs(["spm:100", "spm:200"], "here")
    check_specs(["jieba", "chars"], "here")
    with pytest.raises(ConfigError, match="unknown segmenter 'bpe:8'"):
        check_specs(["bpe:8"], "here")
    with pytest.raises(ConfigError, match="cannot be mixed"):
        check_specs(["spm:100", "chars"], "here")
    with pytest.raises(ConfigError, match="twice"):
        check_specs(["chars", "chars"], "here")


@pytest.mark.parametrize("specs", ["spm:100", ["chars", 5], [None]])
def test_segmenters_that_are_not_a_list_of_names_are_named(specs):
    """Before, ``segmenters: [chars, 5]`` was a traceback (AttributeError), and ``segmenters: spm:100`` (no list)
    an unknown segmenter 's'."""
    with pytest.raises(ConfigError, match=r"prepare: lattice\.segmenters: expected a list of segmenter names"):
        check_specs(specs, "prepare: lattice.segmenters")


def test_missing_segmenter_package_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "thulac", None)  # makes `import thulac` fail
    with pytest.raises(ConfigError, match=r"'thulac'.*pip install thulac"):
        load_segmenter("thulac", Path("."))


def test_word_segmenters_drop_whitespace_and_cover_the_characters():
    pytest.importorskip("jieba")
    pytest.importorskip("thulac")
    text = "贸易发展局 副总裁说, iPhone 12 很好。"
    for spec in ("chars", "jieba", "thulac"):
        tokens = load_segmenter(spec, Path(".")).segment([text])[0]
        assert "".join(tokens) == "".join(text.split()), spec
        assert all(token and not any(c.isspace() for c in token) for token in tokens), spec
    assert load_segmenter("chars", Path(".")).segment(["a b", "  "]) == [["a", "b"], []]


def test_token_vocab_round_trip_and_unknown_tokens(tmp_path):
    vocab = TokenVocab([*TokenVocab.SPECIALS, "▁the", "<pad>", "猫"], tmp_path / "src.tokens")
    vocab.save()
    loaded = TokenVocab.load(tmp_path / "src.tokens")
    assert loaded.all_pieces() == vocab.all_pieces() and len(loaded) == 7
    assert loaded.lookup(["▁the", "猫", "dog", "<pad>"]) == [4, 6, UNK_ID, 5]  # a literal "<pad>" is a token
    with pytest.raises(InputError, match="first four tokens"):
        TokenVocab(["a", "b", "c", "d"], tmp_path / "x.tokens")


def test_an_spm_segmenter_too_small_for_the_characters_is_named(corpus, tmp_path):
    """Before, the error blamed ``vocab_size: 8`` while vocab_size was 60: the 8 was the spm:8 segmenter's."""
    with pytest.raises(ConfigError, match=r"^prepare: lattice\.segmenters: spm:8 is smaller than the \d+ pieces the "
                                          r"corpus's characters need; use spm:\d+ or more"):
        prepare(PrepareConfig(**corpus, out=str(tmp_path / "data"), vocab_size=60,
                              lattice=LatticeConfig(["spm:8", "spm:60"])), progress=False)


def test_prepare_writes_lattice_sources_with_spans(corpus, tmp_path):
    out = tmp_path / "data"
    meta = prepare(PrepareConfig(**corpus, out=str(out), vocab_size=60,
                                 lattice=LatticeConfig(["spm:30", "spm:60"])), progress=False)
    assert meta == DataMeta.load(out) and meta.src_lattice == "lattice" and not meta.joint_vocab
    assert meta.src_vocab == "lattice/src.tokens" and meta.fields == {"train": [FIELD_START, FIELD_END],
                                                                      "valid": [FIELD_START, FIELD_END]}
    src_vocab, _ = load_vocabs(out)
    encoder = LatticeEncoder.load(out / "lattice")
    for split in ("train", "valid"):
        data = ParallelData.open(out, split)
        texts = read_lines(out / f"{split}.src.txt")
        expected = encoder.encode(texts, [f"{split}:{n}" for n in range(len(texts))])
        for index, lattice in enumerate(expected):
            assert data.src[index].tolist() == lattice.ids
            assert data.fields[FIELD_START][index].tolist() == lattice.starts
            assert data.fields[FIELD_END][index].tolist() == lattice.ends
    train = ParallelData.open(out, "train")
    assert all(UNK_ID not in train.src[i] for i in range(len(train)))  # the vocabulary covers the training lattices
    spans = [(s, e) for i in range(len(train)) for s, e in zip(train.fields[FIELD_START][i], train.fields[FIELD_END][i])]
    assert all(start < end for start, end in spans)
    assert len(src_vocab) == meta.src_vocab_size


def test_a_one_segmentation_lattice_corpus_has_the_baseline_pieces(corpus, tmp_path):
    base = prepare(PrepareConfig(**corpus, out=str(tmp_path / "base"), vocab_size=60, joint_vocab=False), progress=False)
    prepare(PrepareConfig(**corpus, out=str(tmp_path / "lat"), vocab_size=60,
                          lattice=LatticeConfig(["spm:60"])), progress=False)
    base_vocab = Vocab.load(tmp_path / "base" / base.src_vocab)
    lattice_vocab, _ = load_vocabs(tmp_path / "lat")
    plain, lattice = ParallelData.open(tmp_path / "base", "train"), ParallelData.open(tmp_path / "lat", "train")
    for index in range(len(plain)):
        assert lattice_vocab.pieces(lattice.src[index]) == base_vocab.pieces(plain.src[index])
        assert lattice.fields[FIELD_START][index].tolist() == list(range(len(plain.src[index])))


def test_too_long_lattices_are_skipped_and_counted(corpus, tmp_path, caplog):
    out = tmp_path / "data"
    encoder_cfg = LatticeConfig(["spm:30", "spm:60"], max_edges=14)
    with caplog.at_level(logging.WARNING, logger="ordo.data.prepare"):
        meta = prepare(PrepareConfig(**corpus, out=str(out), vocab_size=60, lattice=encoder_cfg),
                       progress=False)
    encoder = LatticeEncoder.load(out / "lattice")
    texts = read_lines(corpus["valid_src"])
    sizes = np.array([len(e.ids) for e in encoder.encode(texts, texts)])
    assert 0 < (sizes > 14).sum() < len(texts)
    assert meta.splits["valid"] == (sizes <= 14).sum()
    assert read_lines(out / "valid.src.txt") == [t for t, n in zip(texts, sizes) if n <= 14]
    assert f"valid: {(sizes > 14).sum()} pairs skipped" in caplog.text and "lattice.max_edges=14" in caplog.text


def test_prepare_cli_lattice_flag_and_config_errors(corpus, tmp_path, capsys):
    out = tmp_path / "data"
    assert main(["prepare", "--train-src", corpus["train_src"], "--train-tgt", corpus["train_tgt"], "--out", str(out),
                 "--vocab-size", "60", "--lattice", "spm:30, spm:60"]) == 0
    assert DataMeta.load(out).src_lattice == "lattice"
    assert main(["prepare", "--train-src", corpus["train_src"], "--train-tgt", corpus["train_tgt"], "--out", str(out),
                 "--lattice", "spm:30,chars"]) == 2
    assert "lattice.segmenters" in capsys.readouterr().err
    assert main(["prepare", "--train-src", corpus["train_src"], "--train-tgt", corpus["train_tgt"], "--out", str(out),
                 "--lattice", "spm:30", "--set", "lattice.max_edge=3"]) == 2
    assert "lattice.max_edge: unknown key (did you mean max_edges?)" in capsys.readouterr().err


def test_prepare_missing_segmenter_is_a_clear_error(corpus, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jieba", None)
    assert main(["prepare", "--train-src", corpus["train_src"], "--train-tgt", corpus["train_tgt"],
                 "--out", str(tmp_path / "d"), "--lattice", "jieba,chars"]) == 2
    assert "pip install jieba" in capsys.readouterr().err


def test_chinese_word_lattices_are_over_characters(tmp_path):
    pytest.importorskip("jieba")
    pytest.importorskip("thulac")
    files = write_corpus(tmp_path / "text", CHINESE * 3)
    out = tmp_path / "data"
    prepare(PrepareConfig(**files, out=str(out), vocab_size=100, lattice=LatticeConfig(["jieba", "thulac", "chars"])),
            progress=False)
    data, (vocab, _) = ParallelData.open(out, "train"), load_vocabs(out)
    for index, text in enumerate(CHINESE):
        characters = "".join(text.split())
        tokens = vocab.pieces(data.src[index])
        spans = list(zip(data.fields[FIELD_START][index].tolist(), data.fields[FIELD_END][index].tolist()))
        assert max(end for _, end in spans) == len(characters)
        assert all(characters[start:end] == token for (start, end), token in zip(spans, tokens))
        assert {(k, k + 1) for k in range(len(characters))} <= set(spans)  # every character is an edge
        assert len(spans) > len(characters)  # and the words of jieba/thulac add more
