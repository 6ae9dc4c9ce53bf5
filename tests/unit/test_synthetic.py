"""Tests for the synthetic SVO -> SOV language pair."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ordo.data.synthetic import (
    LEXICON,
    MAX_LENGTH,
    MIN_LENGTH,
    SOURCE_WORD_CLASS,
    TARGET_MARKERS,
    TARGET_WORD_CLASS,
    generate_corpus,
    generate_pair,
    generate_pair_with_alignment,
    write_corpus,
)

Sample = tuple[list[str], list[str], list[tuple[int, int]]]


def _draw(num_pairs: int, seed: int, max_depth: int = 2) -> list[Sample]:
    rng = random.Random(seed)
    samples = []
    for _ in range(num_pairs):
        source, target, alignment = generate_pair_with_alignment(rng, max_depth)
        samples.append((source.split(), target.split(), alignment))
    return samples


@pytest.fixture(scope="module")
def samples() -> list[Sample]:
    return _draw(2000, seed=11)


def _main_verb_index(src: list[str]) -> int:
    """The main verb is the one verb not introduced by the relativiser "that"."""
    verbs = [i for i, w in enumerate(src) if SOURCE_WORD_CLASS[w] == "verb" and src[i - 1] != "that"]
    assert len(verbs) == 1, src
    return verbs[0]


def _has_crossing(alignment: list[tuple[int, int]]) -> bool:
    return any(i < k and j > m for i, j in alignment for k, m in alignment)


def test_same_seed_same_corpus_different_seed_different() -> None:
    assert generate_corpus(300, seed=3) == generate_corpus(300, seed=3)
    assert generate_corpus(300, seed=3) != generate_corpus(300, seed=4)


def test_global_rng_untouched(tmp_path: Path) -> None:
    random.seed(1234)
    state = random.getstate()
    generate_corpus(50, seed=0)
    write_corpus(tmp_path, {"train": 50, "test": 10}, seed=0)
    assert random.getstate() == state


def test_generate_pair_is_the_alignment_path_without_links() -> None:
    for seed in range(20):
        assert generate_pair(random.Random(seed)) == generate_pair_with_alignment(random.Random(seed))[:2]


def test_corpus_has_no_duplicates() -> None:
    corpus = generate_corpus(2000, seed=5)
    assert len(corpus) == 2000
    assert len({src for src, _ in corpus}) == 2000
    assert len({tgt for _, tgt in corpus}) == 2000


def test_write_corpus_splits_disjoint(tmp_path: Path) -> None:
    sizes = {"train": 1500, "valid": 200, "test": 200}
    paths = write_corpus(tmp_path, sizes, seed=7)
    assert set(paths) == set(sizes)
    all_src: list[str] = []
    all_tgt: list[str] = []
    for split, (src_path, tgt_path) in paths.items():
        assert src_path == tmp_path / f"{split}.src" and tgt_path == tmp_path / f"{split}.tgt"
        src_lines = src_path.read_text(encoding="utf-8").splitlines()
        tgt_lines = tgt_path.read_text(encoding="utf-8").splitlines()
        assert len(src_lines) == len(tgt_lines) == sizes[split]
        all_src += src_lines
        all_tgt += tgt_lines
    assert len(set(all_src)) == len(all_src)
    assert len(set(all_tgt)) == len(all_tgt)
    again = write_corpus(tmp_path / "again", sizes, seed=7)
    for split in sizes:
        for first, second in zip(paths[split], again[split]):
            assert first.read_bytes() == second.read_bytes()


def test_growing_train_keeps_test(tmp_path: Path) -> None:
    small = write_corpus(tmp_path / "small", {"train": 300, "test": 100}, seed=2)
    big = write_corpus(tmp_path / "big", {"train": 900, "test": 100}, seed=2)
    small_train = set(small["train"][0].read_text(encoding="utf-8").splitlines())
    big_train = set(big["train"][0].read_text(encoding="utf-8").splitlines())
    small_test = set(small["test"][0].read_text(encoding="utf-8").splitlines())
    big_test = set(big["test"][0].read_text(encoding="utf-8").splitlines())
    assert small_train <= big_train
    assert small_test - big_train <= big_test


def test_format(samples: list[Sample]) -> None:
    for src, tgt, _ in samples:
        assert src[-1] == tgt[-1] == "."
        assert "." not in src[:-1] and "." not in tgt[:-1]
        assert all(w == w.lower() and w for w in src + tgt)


def test_lengths_in_range(samples: list[Sample]) -> None:
    src_lengths = [len(src) for src, _, _ in samples]
    tgt_lengths = [len(tgt) for _, tgt, _ in samples]
    assert MIN_LENGTH <= min(src_lengths + tgt_lengths)
    assert max(src_lengths + tgt_lengths) <= MAX_LENGTH == 25
    assert MIN_LENGTH == 4
    # The range is actually used: short and long sentences both occur.
    assert min(src_lengths) <= 5 and max(src_lengths) >= 18


def test_target_is_verb_final_and_source_verb_follows_subject(samples: list[Sample]) -> None:
    for src, tgt, _ in samples:
        assert TARGET_WORD_CLASS[tgt[-2]] == "verb"
        main_verb = _main_verb_index(src)
        # The final target verb translates the source main verb.
        assert LEXICON[src[main_verb]] == tgt[-2]
        # Source: the subject phrase is Det Adj* N [that ...]; the main verb comes right after it.
        assert SOURCE_WORD_CLASS[src[0]] == "det"
        first_noun = next(i for i, w in enumerate(src) if SOURCE_WORD_CLASS[w] == "noun")
        assert all(SOURCE_WORD_CLASS[w] == "adj" for w in src[1:first_noun])
        if "that" in src[:main_verb]:
            assert src[first_noun + 1] == "that"
        else:
            assert main_verb == first_noun + 1
        before = src[main_verb - 1]
        # The subject phrase ends in a noun, or in the bare verb of an intransitive relative clause.
        assert SOURCE_WORD_CLASS[before] == "noun" or (
            SOURCE_WORD_CLASS[before] == "verb" and src[main_verb - 2] == "that"
        )
        # Target: before the final verb comes its object marker "o", a postposition, or the subject's "ga".
        assert TARGET_WORD_CLASS[tgt[-3]] in ("case", "postp")
        assert "ga" in tgt


def test_gold_alignment_follows_lexicon(samples: list[Sample]) -> None:
    for src, tgt, alignment in samples:
        assert sorted(i for i, _ in alignment) == list(range(len(src)))  # each source word once
        target_side = [j for _, j in alignment]
        assert len(set(target_side)) == len(target_side)
        for i, j in alignment:
            assert LEXICON[src[i]] == tgt[j]
        unaligned = {tgt[j] for j in range(len(tgt)) if j not in set(target_side)}
        assert unaligned <= TARGET_MARKERS


def test_alignment_mostly_non_monotone(samples: list[Sample]) -> None:
    crossing = sum(_has_crossing(alignment) for _, _, alignment in samples)
    assert crossing / len(samples) > 0.5


def test_relative_clause_precedes_its_noun_in_target(samples: list[Sample]) -> None:
    # The relativiser translation closes a relative clause and comes before the head noun phrase,
    # whereas the source "that" follows its noun.
    rel = LEXICON["that"]
    found = 0
    for src, tgt, alignment in samples:
        link = dict(alignment)
        for i, word in enumerate(src):
            if word == "that":
                found += 1
                head_noun = i - 1
                assert SOURCE_WORD_CLASS[src[head_noun]] == "noun"
                assert tgt[link[i]] == rel
                assert link[i] < link[head_noun]
                assert TARGET_WORD_CLASS[tgt[link[i] - 1]] == "verb"
    assert found > 100


def test_max_depth_controls_nesting() -> None:
    def nested_subject_clauses(samples: list[Sample]) -> int:
        # Two "that" before the main verb means a relative clause inside the subject's relative clause.
        return sum(src[: _main_verb_index(src)].count("that") >= 2 for src, _, _ in samples)

    assert all("that" not in src for src, _, _ in _draw(500, seed=1, max_depth=0))
    assert nested_subject_clauses(_draw(1500, seed=1, max_depth=1)) == 0
    assert nested_subject_clauses(_draw(1500, seed=1, max_depth=2)) > 0
    with pytest.raises(ValueError):
        generate_pair(random.Random(0), max_depth=-1)


def test_source_determines_target_and_back(samples: list[Sample]) -> None:
    forward: dict[str, str] = {}
    backward: dict[str, str] = {}
    for src, tgt, _ in _draw(4000, seed=12) + samples:
        source, target = " ".join(src), " ".join(tgt)
        assert forward.setdefault(source, target) == target
        assert backward.setdefault(target, source) == source


def test_vocabularies_disjoint_except_period(samples: list[Sample]) -> None:
    src_vocab = {w for src, _, _ in samples for w in src}
    tgt_vocab = {w for _, tgt, _ in samples for w in tgt}
    assert src_vocab & tgt_vocab == {"."}
    assert set(SOURCE_WORD_CLASS) & set(TARGET_WORD_CLASS) == {"."}
    assert TARGET_MARKERS <= tgt_vocab


def test_lexicon_word_classes_consistent() -> None:
    assert set(LEXICON) == set(SOURCE_WORD_CLASS)
    assert set(LEXICON.values()) | TARGET_MARKERS == set(TARGET_WORD_CLASS)
    for src, tgt in LEXICON.items():
        expected = "postp" if SOURCE_WORD_CLASS[src] == "prep" else SOURCE_WORD_CLASS[src]
        assert TARGET_WORD_CLASS[tgt] == expected
    counts = {c: sum(v == c for v in SOURCE_WORD_CLASS.values()) for c in ("noun", "verb", "adj")}
    assert counts["noun"] >= 40 * 2 and counts["verb"] >= 20 * 3 and counts["adj"] >= 15
