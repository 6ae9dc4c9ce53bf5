"""The segmenters a lattice is built from (paper 002 §3), named by spec strings.

- ``spm:N``: a SentencePiece model of N pieces trained at prepare time on the training source (subword
  lattices for alphabetic languages). Pieces keep SentencePiece's ``▁`` word marks, so every model's
  pieces concatenate to the same normalised text.
- ``chars``: every non-space character.
- ``jieba``: jieba's default (accurate, HMM) mode; the dictionary ships inside the package.
- ``thulac``: THULAC's segmenter (``seg_only``), trained on the Chinese Treebank style; its model ships
  inside the package.

Word segmenters drop whitespace, so their tokens concatenate to the sentence's non-space characters and
combine with ``chars`` and with each other, not with ``spm:N``. A segmenter whose package is missing is a
:class:`~ordo.errors.ConfigError` naming the package to install.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ordo.data.vocab import Vocab
from ordo.errors import ConfigError

WORD_SEGMENTERS = ("chars", "jieba", "thulac")
SPM_PREFIX = "spm:"


def _import(package: str, segmenter: str) -> ModuleType:
    """Import ``package`` or raise a ConfigError that says how to install it."""
    try:
        return importlib.import_module(package)
    except ImportError:
        raise ConfigError(
            f"lattice segmenter {segmenter!r} needs the Python package {package!r}: "
            f"pip install {package}  (or pip install 'ordo[zh]')"
        ) from None


class Segmenter:
    """Splits texts into token lists; subclasses implement :meth:`segment_one` or :meth:`segment`."""

    spec = ""

    def segment(self, texts: list[str]) -> list[list[str]]:
        """Token lists of ``texts``, one per text."""
        return [self.segment_one(text) for text in texts]

    def segment_one(self, text: str) -> list[str]:
        """Tokens of one text."""
        raise NotImplementedError


class SentencePieceSegmenter(Segmenter):
    """The pieces of a SentencePiece model (``spm:N``)."""

    def __init__(self, spec: str, model: Path) -> None:
        self.spec = spec
        self.vocab = Vocab.load(model)

    def segment(self, texts: list[str]) -> list[list[str]]:
        """Piece strings of ``texts``, encoded by SentencePiece's thread pool."""
        return self.vocab.processor.encode(list(texts), out_type=str)


class WordSegmenter(Segmenter):
    """A word segmenter's tokens without whitespace: they concatenate to the text's non-space characters."""

    def segment_one(self, text: str) -> list[str]:
        """Tokens of one text, whitespace removed from and between them."""
        if not text.strip():
            return []
        return [stripped for token in self.words(text) if (stripped := "".join(token.split()))]

    def words(self, text: str) -> list[str]:
        """The segmenter's own output for ``text``."""
        raise NotImplementedError


class CharacterSegmenter(WordSegmenter):
    """Every non-space character (``chars``)."""

    spec = "chars"

    def words(self, text: str) -> list[str]:
        """The characters of ``text``."""
        return list(text)


class JiebaSegmenter(WordSegmenter):
    """jieba's accurate mode with its HMM for unknown words (``jieba``)."""

    spec = "jieba"

    def __init__(self) -> None:
        jieba = _import("jieba", self.spec)
        jieba.setLogLevel(logging.WARNING)
        self.tokenizer: Any = jieba.Tokenizer()

    def words(self, text: str) -> list[str]:
        """jieba's words of ``text``."""
        return list(self.tokenizer.cut(text, HMM=True))


class ThulacSegmenter(WordSegmenter):
    """THULAC, segmentation only (``thulac``)."""

    spec = "thulac"

    def __init__(self) -> None:
        thulac = _import("thulac", self.spec)
        with contextlib.redirect_stdout(sys.stderr):  # THULAC prints "Model loaded succeed" on stdout
            self.model: Any = thulac.thulac(seg_only=True)

    def words(self, text: str) -> list[str]:
        """THULAC's words of ``text``."""
        return [word for word, _ in self.model.cut(text, text=False)]


def check_specs(specs: list[str], where: str) -> None:
    """Reject a ``specs`` that is not a list of names, unknown segmenter specs, duplicates, and a mix of ``spm:N``
    with word segmenters.

    Raises:
        ConfigError: naming ``where`` and the bad spec.
    """
    if not isinstance(specs, list) or not all(isinstance(spec, str) for spec in specs):
        raise ConfigError(f"{where}: expected a list of segmenter names such as [spm:2000, spm:4000] or "
                          f"[jieba, thulac, chars], got {specs!r}")
    for spec in specs:
        if spec in WORD_SEGMENTERS:
            continue
        size = spec[len(SPM_PREFIX):] if spec.startswith(SPM_PREFIX) else ""
        if not size.isdigit() or int(size) < 5:
            known = ", ".join([*WORD_SEGMENTERS, "spm:N (N >= 5)"])
            raise ConfigError(f"{where}: unknown segmenter {spec!r} (known: {known})")
    if len(set(specs)) != len(specs):
        raise ConfigError(f"{where}: a segmenter is listed twice in {specs}")
    kinds = {spec.startswith(SPM_PREFIX) for spec in specs}
    if len(kinds) > 1:
        raise ConfigError(f"{where}: spm:N segmenters keep SentencePiece's ▁ marks and cannot be mixed with "
                          f"word segmenters ({', '.join(WORD_SEGMENTERS)})")


def spm_model_name(spec: str) -> str:
    """The file name of an ``spm:N`` segmenter's model inside the lattice directory."""
    return f"spm.{spec[len(SPM_PREFIX):]}.model"


def load_segmenter(spec: str, directory: Path) -> Segmenter:
    """The segmenter ``spec`` names; ``spm:N`` loads its model from ``directory``.

    Raises:
        ConfigError: a missing package (named) or an unknown spec.
        InputError: a missing or invalid SentencePiece model.
    """
    if spec.startswith(SPM_PREFIX):
        return SentencePieceSegmenter(spec, directory / spm_model_name(spec))
    classes: dict[str, type[Segmenter]] = {
        "chars": CharacterSegmenter, "jieba": JiebaSegmenter, "thulac": ThulacSegmenter,
    }
    if spec not in classes:
        raise ConfigError(f"unknown lattice segmenter {spec!r}")
    return classes[spec]()
