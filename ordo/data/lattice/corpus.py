"""Lattice corpora: the segmenters of a lattice directory, its source vocabulary, and encoding text into
edge ids with their spans (paper 002 §3).

A lattice directory (``<data>/lattice``, copied into every run trained on it) holds:

- ``lattice.yaml``: the segmenter specs, in order (the first is the 1-best segmentation the length
  filters of ``ordo prepare`` count), and the vocabulary file name;
- ``spm.N.model``: the SentencePiece model of each ``spm:N`` segmenter;
- ``src.tokens``: the one source vocabulary over the tokens of all segmentations
  (:class:`ordo.data.vocab.TokenVocab`).

``ordo prepare`` builds it with :func:`train_lattice_encoder`; ``ordo translate`` loads it with
:meth:`LatticeEncoder.load`, so raw text is segmented exactly as the training data was.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ordo.data.lattice.graph import FIELD_END, FIELD_START, Lattice, SegmentationMismatch, build_lattice
from ordo.data.lattice.segmenters import SPM_PREFIX, Segmenter, check_specs, load_segmenter, spm_model_name
from ordo.data.textio import atomic_write, read_yaml
from ordo.data.vocab import TokenVocab, VocabSizeTooSmall, train_sentencepiece
from ordo.errors import ConfigError, InputError

logger = logging.getLogger("ordo.data.lattice")

SPEC_NAME = "lattice.yaml"
VOCAB_NAME = "src" + TokenVocab.SUFFIX
CHUNK_LINES = 2_000  # sentences segmented per batch when the vocabulary is counted


@dataclass
class LatticeConfig:
    """The ``lattice`` section of ``ordo prepare`` (paper 002 §3); off while ``segmenters`` is empty."""

    segmenters: list[str] = field(default_factory=list)  # e.g. [spm:2000, spm:4000, spm:8000] or [jieba, thulac, chars]
    max_edges: int = 1000  # a source whose lattice has more edges (EOS not counted) is skipped and counted
    vocab_size: int = 0  # source tokens kept, most frequent first (0: every token of the training lattices)

    @property
    def enabled(self) -> bool:
        """Whether ``ordo prepare`` builds lattices."""
        return bool(self.segmenters)

    def check(self) -> None:
        """Reject bad specs or limits.

        Raises:
            ConfigError: naming the ``lattice.*`` key.
        """
        check_specs(self.segmenters, "prepare: lattice.segmenters")
        if self.max_edges < 1:
            raise ConfigError(f"prepare: lattice.max_edges must be positive, not {self.max_edges}")
        if self.vocab_size < 0:
            raise ConfigError(f"prepare: lattice.vocab_size must be >= 0, not {self.vocab_size}")


@dataclass
class EncodedLattice:
    """One source sentence as encoder input: edge ids, spans, and the length of its 1-best segmentation."""

    ids: list[int]
    starts: list[int]
    ends: list[int]
    one_best_length: int

    def fields(self) -> dict[str, np.ndarray]:
        """The per-edge fields ``lattice_start`` and ``lattice_end`` as int64 rows."""
        return {FIELD_START: np.asarray(self.starts, dtype=np.int64), FIELD_END: np.asarray(self.ends, dtype=np.int64)}


class LatticeEncoder:
    """Segmenters plus the source vocabulary of a lattice directory.

    Args:
        segmenters: in spec order; the first gives the 1-best length.
        vocab: the source token vocabulary.
    """

    def __init__(self, segmenters: list[Segmenter], vocab: TokenVocab) -> None:
        self.segmenters = segmenters
        self.vocab = vocab

    @classmethod
    def load(cls, directory: Path) -> LatticeEncoder:
        """Load ``directory/lattice.yaml`` with its SentencePiece models and vocabulary.

        Raises:
            InputError: a missing or invalid file, named.
            ConfigError: a segmenter whose package is not installed (the package is named).
        """
        directory = Path(directory)
        spec = _read_spec(directory / SPEC_NAME)
        segmenters = [load_segmenter(name, directory) for name in spec["segmenters"]]
        return cls(segmenters, TokenVocab.load(directory / spec["vocab"]))

    def lattices(self, texts: list[str], where: Iterable[str]) -> list[Lattice]:
        """The lattice of every text (paper 002 §3).

        Args:
            texts: raw source sentences.
            where: a ``file:line`` label per text, for errors.

        Raises:
            InputError: naming ``file:line`` when two segmenters disagree on the text they cover.
        """
        return [lattice for lattice, _ in self._lattices(texts, where)]

    def encode(self, texts: list[str], where: Iterable[str]) -> list[EncodedLattice]:
        """Edge ids and spans of every text, with its 1-best (first segmenter's) length."""
        return [
            EncodedLattice(self.vocab.lookup(lattice.tokens), lattice.starts, lattice.ends, one_best)
            for lattice, one_best in self._lattices(texts, where)
        ]

    def _lattices(self, texts: list[str], where: Iterable[str]) -> list[tuple[Lattice, int]]:
        """Each text's lattice and the length of its first segmentation (each segmenter runs once)."""
        segmented = [segmenter.segment(texts) for segmenter in self.segmenters]  # K x (n, tokens)
        lattices = []
        for index, label in zip(range(len(texts)), where):
            try:
                lattices.append((build_lattice([tokens[index] for tokens in segmented]), len(segmented[0][index])))
            except SegmentationMismatch as err:
                specs = ", ".join(s.spec for s in self.segmenters)
                raise InputError(f"{label}: the segmenters ({specs}) cover different text: {err}") from None
        return lattices


def _read_spec(path: Path) -> dict[str, Any]:
    """Parse and check ``lattice.yaml``."""
    try:
        spec = read_yaml(path)
    except ConfigError as err:
        raise InputError(f"{err} (a lattice directory is written by `ordo prepare`)") from None
    if not isinstance(spec.get("segmenters"), list) or "vocab" not in spec:
        raise InputError(f"{path}: expected the keys segmenters (a list) and vocab")
    try:
        check_specs(spec["segmenters"], str(path))
    except ConfigError as err:
        raise InputError(str(err)) from None
    return spec


def train_lattice_encoder(
    cfg: LatticeConfig,
    spm_source: Path,
    sources: Iterable[tuple[str, str]],
    directory: Path,
    spm_options: dict[str, Any],
) -> LatticeEncoder:
    """Write a lattice directory for the training source: the ``spm:N`` models, the source vocabulary over
    the tokens of every training lattice, and ``lattice.yaml`` (paper 002 §3).

    Args:
        cfg: the checked ``lattice`` section.
        spm_source: the training source as a plain text file, the ``spm:N`` models' training data.
        sources: ``(file:line, text)`` of every training source sentence, for the vocabulary.
        directory: the lattice directory to (re)write.
        spm_options: ``model_type``, ``character_coverage``, ``input_sentence_size`` and ``seed`` of
            :func:`ordo.data.vocab.train_sentencepiece`.

    Returns:
        The encoder over the new directory.

    Raises:
        InputError: naming ``file:line`` when the segmenters disagree on a sentence.
        ConfigError: a segmenter whose package is not installed (the package is named), or an ``spm:N`` whose N
            is below the pieces the characters need.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for spec in cfg.segmenters:
        if spec.startswith(SPM_PREFIX):
            prefix = directory / spm_model_name(spec).removesuffix(".model")
            try:
                train_sentencepiece([spm_source], prefix, int(spec[len(SPM_PREFIX):]), **spm_options)
            except VocabSizeTooSmall as err:
                raise ConfigError(f"prepare: lattice.segmenters: {spec} is smaller than the {err.required} pieces the "
                                  f"corpus's characters need; use {SPM_PREFIX}{err.required} or more, or lower "
                                  "character_coverage") from None
    segmenters = [load_segmenter(spec, directory) for spec in cfg.segmenters]
    counts = _count_tokens(LatticeEncoder(segmenters, TokenVocab(TokenVocab.SPECIALS, directory / VOCAB_NAME)), sources)
    ranked = sorted(counts, key=lambda token: (-counts[token], token))
    kept = ranked[: cfg.vocab_size] if cfg.vocab_size else ranked
    vocab = TokenVocab([*TokenVocab.SPECIALS, *kept], directory / VOCAB_NAME)
    vocab.save()
    with atomic_write(directory / SPEC_NAME) as handle:
        yaml.safe_dump({"segmenters": list(cfg.segmenters), "vocab": VOCAB_NAME}, handle, allow_unicode=True)
    logger.info("lattice source vocabulary: %d of %d tokens of %s", len(kept), len(counts), ", ".join(cfg.segmenters))
    return LatticeEncoder(segmenters, vocab)


def _count_tokens(encoder: LatticeEncoder, sources: Iterable[tuple[str, str]]) -> Counter[str]:
    """How many training lattices hold each edge token."""
    counts: Counter[str] = Counter()
    iterator = iter(sources)
    while chunk := list(islice(iterator, CHUNK_LINES)):
        for lattice in encoder.lattices([text for _, text in chunk], [label for label, _ in chunk]):
            counts.update(lattice.tokens)
    return counts
