"""Raw source lines as model inputs, the one place that chooses between a plain and a lattice source.

A plain source is its SentencePiece pieces; a lattice source (paper 002, SPEC §3) is the edge ids of the
lattice over several segmentations, with the per-edge fields ``lattice_start`` / ``lattice_end``. ``ordo
prepare`` and translation encode through :class:`SourceEncoder`, and both refuse a source longer than their
limit the same way: it is never cut. Prepare skips and counts such a pair (its limit is
``lattice.max_edges``; the piece-length filters of training data are prepare's own), translation raises
:func:`refuse_over_long`'s error naming the line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ordo.data.lattice.corpus import LatticeEncoder
from ordo.data.lattice.graph import FIELDS as LATTICE_FIELDS
from ordo.data.vocab import TokenVocab, Vocab
from ordo.errors import InputError


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


def model_inputs(encoder: SourceEncoder, texts: list[str], source: str, limit: int
                 ) -> tuple[list[np.ndarray], dict[str, list[np.ndarray]]]:
    """Source rows and per-token fields of raw ``texts`` for a model taking at most ``limit`` tokens; an
    over-long text is an error naming ``source`` and its (1-based) line."""
    labels = [f"{source}:{line}" for line in range(1, len(texts) + 1)]
    encoded = encoder.encode(texts, labels)
    refuse_over_long(encoded, labels, limit, "lattice edges" if encoder.lattice is not None else "pieces")
    rows = [np.asarray(row.ids, dtype=np.int64) for row in encoded]
    return rows, {name: [row.fields[name] for row in encoded] for name in encoder.field_names}
