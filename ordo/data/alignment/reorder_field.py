"""The ``reorder_positions`` batch field: target-order positions of every source piece (paper 000, Eq. 4),
computed from word alignments of a prepared split and stored with its binarized data."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ordo.data.alignment.aligners import align_files
from ordo.data.alignment.links import Link, check_range, format_links, split_words
from ordo.data.alignment.target_order import piece_positions, target_order
from ordo.data.corpus import DataMeta, TokenArray, add_field_name, write_field_array
from ordo.data.textio import atomic_write, iter_lines
from ordo.data.vocab import Vocab

logger = logging.getLogger("ordo.align")

FIELD = "reorder_positions"
WORD_START = "\u2581"  # SentencePiece's word-boundary mark


def pieces_per_word(pieces: Sequence[str]) -> list[int]:
    """How many pieces each word has: a piece that starts with ▁ opens a word (a first piece without one too)."""
    counts: list[int] = []
    for piece in pieces:
        if piece.startswith(WORD_START) or not counts:
            counts.append(1)
        else:
            counts[-1] += 1
    return counts


@dataclass
class FieldStats:
    """How the rows of a split were made."""

    sentences: int = 0
    unsegmentable: int = 0  # pieces did not split into the text's words: sequential positions stored


def reorder_rows(
    src_rows: TokenArray, src_lines: Iterable[str], tgt_lines: Iterable[str], vocab: Vocab,
    alignments: Iterable[set[Link]], where: str, stats: FieldStats,
) -> Iterator[list[int]]:
    """1-based target-order position of each source piece of every pair, from word ``alignments``.

    ``src_lines``/``tgt_lines`` are the pairs' text (whose whitespace words the links index) and ``src_rows``
    their source pieces. When the pieces do not split into the text's words (SentencePiece normalization can
    change spacing), the row keeps sequential positions 1..P and the pair is counted in ``stats.unsegmentable``.
    """
    for index, (links, src_text, tgt_text) in enumerate(zip(alignments, src_lines, tgt_lines, strict=True)):
        ids = src_rows[index]
        words = split_words(src_text)
        counts = pieces_per_word(vocab.pieces(ids.tolist()))
        stats.sentences += 1
        if len(counts) != len(words) or not words:
            stats.unsegmentable += 1
            yield list(range(1, len(ids) + 1))
            continue
        check_range(links, len(words), len(split_words(tgt_text)), f"{where}:{index + 1}")
        yield [p + 1 for p in piece_positions(target_order(len(words), links), counts)]


def add_reorder_field(data_dir: Path, meta: DataMeta, split: str, alignments: Iterable[set[Link]],
                      where: str) -> FieldStats:
    """Compute and store ``reorder_positions`` for ``split`` of a prepared directory from its alignments
    (one link set per kept pair, in order; ``where`` names their source in errors), and record the field in
    ``meta``, the directory's metadata, which the caller saves."""
    src = TokenArray.open(data_dir / f"{split}.src")
    vocab = Vocab.load(data_dir / meta.src_vocab)
    stats = FieldStats()
    src_lines = (text for _, text in iter_lines(data_dir / f"{split}.src.txt"))
    tgt_lines = (text for _, text in iter_lines(data_dir / f"{split}.tgt.txt"))
    rows = reorder_rows(src, src_lines, tgt_lines, vocab, alignments, where, stats)
    write_field_array(data_dir, split, FIELD, rows, max_value=int(src.lengths.max()) if len(src) else 1)
    add_field_name(meta, split, FIELD)
    if stats.unsegmentable:
        logger.warning("%s: %d of %d sentences did not split into words; they keep sequential positions",
                       split, stats.unsegmentable, stats.sentences)
    return stats


def align_and_store(data_dir: Path, meta: DataMeta, aligner: str, symmetrization: str) -> None:
    """Align the kept pairs of every split of ``meta`` together (more text, better alignments), write each
    split's links to ``{split}.align`` (Pharaoh, 0-based) and its ``reorder_positions`` field, and record the
    fields in ``meta``; ``data.yaml`` is left to the caller, to be written once everything else is."""
    data_dir = Path(data_dir)
    with tempfile.TemporaryDirectory(prefix="ordo-align-") as tmp:
        joined = {side: Path(tmp) / f"all.{side}" for side in ("src", "tgt")}
        for side, path in joined.items():
            with open(path, "w", encoding="utf-8") as out:
                for split in meta.splits:
                    out.writelines(text + "\n" for _, text in iter_lines(data_dir / f"{split}.{side}.txt"))
        links = align_files(joined["src"], joined["tgt"], aligner, symmetrization)
        for split, count in meta.splits.items():
            with atomic_write(data_dir / f"{split}.align") as handle:
                add_reorder_field(data_dir, meta, split, _written(links, count, handle),
                                  str(data_dir / f"{split}.align"))


def _written(links: Iterator[set[Link]], count: int, handle: IO) -> Iterator[set[Link]]:
    """The next ``count`` link sets of ``links``, each also written to ``handle`` as a Pharaoh line."""
    for _ in range(count):
        item = next(links)
        handle.write(format_links(item) + "\n")
        yield item
