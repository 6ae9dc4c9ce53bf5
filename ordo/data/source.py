"""Raw source lines as model inputs, the one place that chooses between a plain and a lattice source.

A plain source is its SentencePiece pieces; a lattice source (paper 002 §3) is the edge ids of the
lattice over several segmentations, with the per-edge fields ``lattice_start`` / ``lattice_end``. ``ordo
prepare`` and translation encode through :class:`SourceEncoder`, and both refuse a source longer than their
limit the same way: it is never cut. Prepare skips and counts such a pair (its limit is
``lattice.max_edges``; the piece-length filters of training data are prepare's own). Translation cuts a
source over the model's limit to that limit with a warning naming the line, or with ``long_lines="error"``
raises :func:`refuse_over_long`'s error naming it. A blank line (empty or only whitespace) is an empty row.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ordo.data.lattice.corpus import LatticeEncoder
from ordo.data.lattice.graph import FIELDS as LATTICE_FIELDS
from ordo.data.vocab import TokenVocab, Vocab
from ordo.errors import InputError

logger = logging.getLogger(__name__)

LongLines = Literal["truncate", "error"]  # what translation does with a source over the model's limit


@dataclass
class EncodedSource:
    """One source sentence as encoder input.

    Attributes:
        ids: pieces, or lattice edge ids.
        fields: per-token fields (a lattice's spans), each an int64 row as long as ``ids``; empty for plain text.
        length: the length the training-data filters count: the pieces, or those of the lattice's 1-best
            (first) segmentation.
    """

    ids: list[int]
    fields: dict[str, np.ndarray] = field(default_factory=dict)
    length: int = 0

    def cut(self, limit: int) -> EncodedSource:
        """The first ``limit`` tokens (a lattice's edges are in (start, end) order, so a prefix of the sentence
        stays whole) with their fields."""
        return EncodedSource(self.ids[:limit], {k: v[:limit] for k, v in self.fields.items()}, min(self.length, limit))


@dataclass
class SourceEncoder:
    """How source sentences become rows: SentencePiece pieces, or lattice edges with their spans.

    Attributes:
        vocab: the source vocabulary (the lattice's token vocabulary for a lattice corpus).
        lattice: the segmenters of a lattice corpus, or None.
    """

    vocab: Vocab | TokenVocab
    lattice: LatticeEncoder | None = None

    @property
    def field_names(self) -> tuple[str, ...]:
        """The per-token fields every encoded source carries."""
        return LATTICE_FIELDS if self.lattice is not None else ()

    def encode(self, texts: list[str], labels: list[str]) -> list[EncodedSource]:
        """Each text as an :class:`EncodedSource`; ``labels`` (``file:line``) name the texts in errors."""
        if self.lattice is None:
            return [EncodedSource(ids, {}, len(ids)) for ids in self.vocab.encode_batch(texts)]
        return [EncodedSource(row.ids, row.fields(), row.one_best_length) for row in self.lattice.encode(texts, labels)]


def refuse_over_long(encoded: list[EncodedSource], labels: list[str], limit: int, unit: str) -> None:
    """Raise an :class:`InputError` naming the first source with more than ``limit`` ``unit`` (pieces, edges)."""
    for label, row in zip(labels, encoded):
        if len(row.ids) > limit:
            raise InputError(f"{label}: {len(row.ids)} {unit}, more than model.max_positions-1={limit}")


def cut_over_long(encoded: list[EncodedSource], labels: list[str], limit: int, unit: str) -> list[EncodedSource]:
    """Each source cut to ``limit`` tokens, with one warning naming the first over-long source and counting
    the others (as CTranslate2 and Marian cut rather than fail)."""
    over = [(label, len(row.ids)) for label, row in zip(labels, encoded) if len(row.ids) > limit]
    if over:
        (label, count), rest = over[0], [label for label, _ in over[1:]]
        others = f"; {len(rest)} more cut: {', '.join(rest[:3])}{', ...' if len(rest) > 3 else ''}" if rest else ""
        logger.warning("%s: %d %s, cut to model.max_positions-1=%d%s", label, count, unit, limit, others)
    return [row.cut(limit) if len(row.ids) > limit else row for row in encoded]


def check_texts(texts: Sequence[str], source: str, first_line: int = 1) -> None:
    """Refuse ``texts`` unless it is a list of strings: a single string would be read as one sentence per
    character.

    Raises:
        InputError: naming ``source`` (and the line of an item that is not a string).
    """
    if isinstance(texts, str | bytes):
        raise InputError(f"{source}: expected a list of sentences, got one {type(texts).__name__} (wrap it in a "
                         "list: [text])")
    for line, text in enumerate(texts, first_line):
        if not isinstance(text, str):
            raise InputError(f"{source}:{line}: expected a string, got {type(text).__name__}")


def model_inputs(encoder: SourceEncoder, texts: list[str], source: str, limit: int, long_lines: LongLines = "error",
                 first_line: int = 1) -> tuple[list[np.ndarray], dict[str, list[np.ndarray]]]:
    """Source rows and per-token fields of raw ``texts`` for a model taking at most ``limit`` tokens.

    Args:
        encoder: pieces or lattices.
        texts: raw source lines; a blank one becomes an empty row.
        source: the file the texts come from, for messages (``source:line``).
        limit: the most tokens the model takes.
        long_lines: ``error``: an over-long text is an InputError naming its line; ``truncate``: cut it, warning.
        first_line: the line number of ``texts[0]`` in ``source``.

    Raises:
        InputError: when ``texts`` is not a list of strings (:func:`check_texts`), or a text is over ``limit``
            with ``long_lines="error"``.
    """
    check_texts(texts, source, first_line)
    labels = [f"{source}:{line}" for line in range(first_line, first_line + len(texts))]
    encoded = [row if text.strip() else row.cut(0) for text, row in zip(texts, encoder.encode(texts, labels))]
    unit = "lattice edges" if encoder.lattice is not None else "pieces"
    if long_lines == "error":
        refuse_over_long(encoded, labels, limit, unit)
    else:
        encoded = cut_over_long(encoded, labels, limit, unit)
    rows = [np.asarray(row.ids, dtype=np.int64) for row in encoded]
    return rows, {name: [row.fields[name] for row in encoded] for name in encoder.field_names}
