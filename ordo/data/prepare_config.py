"""The settings of ``ordo prepare`` (:class:`PrepareConfig`) and their checks before any file is read: each key,
and each corpus file, which must be readable more than once and not one of the outputs (:mod:`ordo.data.prepare`
runs the pipeline)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ordo.choices import check_choices
from ordo.data.corpus import LATTICE_DIR, META_NAME, DataMeta
from ordo.data.lattice.corpus import LatticeConfig
from ordo.data.shards import vocab_digest
from ordo.errors import ConfigError, InputError

SPLITS = ("train", "valid", "test")
SPM_FILES = tuple(f"spm{side}.{ext}" for side in ("", ".src", ".tgt") for ext in ("model", "vocab"))  # models, pieces


@dataclass
class PrepareConfig:
    """Settings of ``ordo prepare`` (YAML keys, or ``--set key=value``)."""

    train_src: str = ""  # training source text, plain or .gz (required)
    train_tgt: str = ""  # training target text, line-aligned with train_src (required)
    valid_src: str = ""  # validation source text; "" means no validation split
    valid_tgt: str = ""  # validation target text (references for BLEU during training)
    test_src: str = ""  # test source text; "" means no test split
    test_tgt: str = ""  # test target text
    out: str = ""  # output data directory, created if missing (required)
    src_lang: str = "src"  # source language code, recorded in data.yaml
    tgt_lang: str = "tgt"  # target language code, recorded in data.yaml
    vocab_size: int = 8000  # SentencePiece pieces per model (an upper bound for tiny corpora)
    joint_vocab: bool = True  # one SentencePiece model for both sides; false: one per side
    model_type: Literal["unigram", "bpe"] = "unigram"  # SentencePiece algorithm
    character_coverage: float = 1.0  # share of characters covered (e.g. 0.9995 for Japanese/Chinese)
    max_len: int = 250  # train pairs with a side longer than this many pieces are dropped; 0: no limit
    min_len: int = 1  # train pairs with a side shorter than this many pieces are dropped
    max_len_ratio: float = 3.0  # train pairs whose piece counts differ by more than this factor are dropped; 0: off
    max_words: int = 0  # train pairs with a side of more than this many words (split on spaces) are dropped; 0: off
    empty_lines: Literal["error", "skip"] = "error"  # an empty line is an error, or skip: drop its pair, count it
    spm_input_sentence_size: int = 2_000_000  # sentences sampled to train SentencePiece (bounds the memory); 0: all
    seed: int = 1  # seed of the sample SentencePiece learns from (and of its own sampling)
    reorder_positions: bool = False  # align every split's pairs together, store target-order positions (paper 000)
    aligner: Literal["eflomal", "fast_align"] = "eflomal"  # word aligner for reorder_positions
    symmetrization: Literal["grow-diag-final-and", "intersection", "union"] = "grow-diag-final-and"
    lattice: LatticeConfig = field(default_factory=LatticeConfig)  # source lattices of several segmentations (paper 002)
    vocab_from: str = ""  # a prepared directory whose vocabularies encode this corpus (a shard of one corpus)

    def __post_init__(self) -> None:
        check_choices(self, "prepare")


def check_config(cfg: PrepareConfig) -> None:
    """Reject missing or inconsistent settings before any file is read.

    Args:
        cfg: the settings.

    Raises:
        ConfigError: naming the key.
        InputError: when ``vocab_from`` is not a prepared directory (naming its ``data.yaml``) or lacks a
            vocabulary file (naming it), or a corpus file is a pipe (:func:`check_rereadable`).
    """
    for key in ("train_src", "train_tgt", "out"):
        if not getattr(cfg, key):
            raise ConfigError(f"prepare: {key} is required")
    for split in ("valid", "test"):
        if bool(getattr(cfg, f"{split}_src")) != bool(getattr(cfg, f"{split}_tgt")):
            raise ConfigError(f"prepare: give both {split}_src and {split}_tgt, or neither")
    for pair in split_files(cfg).values():
        for path in pair:
            check_rereadable(path)
    check_inputs_are_not_outputs(cfg)
    if cfg.vocab_size < 5:
        raise ConfigError(f"prepare: vocab_size {cfg.vocab_size} leaves no room beside the 4 special pieces")
    if not 0.0 < cfg.character_coverage <= 1.0:
        raise ConfigError(f"prepare: character_coverage must be in (0, 1], not {cfg.character_coverage}")
    if Path(cfg.out).exists() and not Path(cfg.out).is_dir():
        raise ConfigError(f"prepare: out {cfg.out} is a file, not a directory")
    if cfg.min_len < 0 or cfg.max_len < 0 or 0 < cfg.max_len < cfg.min_len:
        raise ConfigError(f"prepare: need 0 <= min_len <= max_len, got {cfg.min_len} and {cfg.max_len}")
    if cfg.spm_input_sentence_size < 0 or 0 < cfg.spm_input_sentence_size <= 100:
        raise ConfigError(f"prepare: spm_input_sentence_size must be over 100 (SentencePiece's minimum), or 0 for "
                          f"every sentence, not {cfg.spm_input_sentence_size}")
    if cfg.max_len_ratio < 0 or 0 < cfg.max_len_ratio < 1:
        raise ConfigError(f"prepare: max_len_ratio must be >= 1 (or 0 for no limit), not {cfg.max_len_ratio}")
    if cfg.max_words < 0:
        raise ConfigError(f"prepare: max_words must be >= 0 (0: no limit), not {cfg.max_words}")
    if cfg.lattice.enabled:
        cfg.lattice.check()
        if cfg.reorder_positions:
            raise ConfigError("prepare: reorder_positions aligns source pieces and cannot be combined with lattice")
    if cfg.vocab_from:
        if Path(cfg.vocab_from).resolve() == Path(cfg.out).resolve():
            raise ConfigError(f"prepare: vocab_from {cfg.vocab_from} is the output directory; name another one")
        if cfg.lattice.enabled:
            raise ConfigError("prepare: vocab_from brings the lattice segmenters of its directory; leave lattice out")
        source = Path(cfg.vocab_from)
        vocab_digest(source, DataMeta.load(source))  # a wrong directory or a missing model fails here, not later
    if cfg.reorder_positions:
        from ordo.data.alignment.aligners import aligner_module

        aligner_module(cfg.aligner)  # a missing aligner fails here, not after the corpus is encoded


def check_rereadable(path: Path) -> None:
    """Refuse a corpus file that cannot be read twice: preparation reads each file more than once (checking the
    pairs, sampling SentencePiece's input, encoding), and a pipe (the shell's ``<(zcat F)``) is empty the second
    time, which SentencePiece would report as an internal error. A missing file is left to the reading, which
    names it.

    Raises:
        InputError: naming ``path`` and what to give instead.
    """
    if path.exists() and not path.is_file():
        raise InputError(f"{path}: not a regular file (a pipe?): ordo prepare reads each corpus file more than "
                         "once; give the file itself (plain or .gz) or write the stream to a file first")


def check_inputs_are_not_outputs(cfg: PrepareConfig) -> None:
    """Refuse a corpus file that preparing into ``out`` would overwrite (``--train-src DIR/train.src.txt --out
    DIR`` replaced the input by its kept pairs).

    Raises:
        ConfigError: naming the key and the file.
    """
    out = Path(cfg.out).resolve()
    splits = split_files(cfg)
    names = {META_NAME, *SPM_FILES, *(f"{split}.align" for split in splits)}
    names |= {f"{split}.{side}.{ext}" for split in splits for side in ("src", "tgt") for ext in ("bin", "idx", "txt")}
    fields = tuple(f"{split}.field." for split in splits)
    for split, pair in splits.items():
        for side, path in zip(("src", "tgt"), pair):
            resolved = path.resolve()
            written = resolved.parent == out and (resolved.name in names or resolved.name.startswith(fields))
            if written or resolved.is_relative_to(out / LATTICE_DIR):
                raise ConfigError(f"prepare: {split}_{side} {path}: prepare writes that file into out {cfg.out}; "
                                  "move it or name another out")


def split_files(cfg: PrepareConfig) -> dict[str, tuple[Path, Path]]:
    """The (source, target) files of each split that ``cfg`` names, train first."""
    files = {}
    for split in SPLITS:
        src, tgt = getattr(cfg, f"{split}_src"), getattr(cfg, f"{split}_tgt")
        if src:
            files[split] = (Path(src), Path(tgt))
    return files



