"""Word-alignment links in Pharaoh format: ``i-j`` pairs of word positions, one sentence per line.

ordo reads and writes 0-based links (the convention of fast_align, eflomal and Moses). Gold test sets in
``.talp`` form are 1-based and mark possible links as ``ipj``; :func:`read_links` takes ``one_based`` and
returns sure and possible links separately (possible includes sure, as Och & Ney 2003 define them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import TypeVar

from ordo.data.textio import iter_lines
from ordo.errors import InputError

Link = tuple[int, int]  # (source word, target word), 0-based
_LINK = re.compile(r"^(\d+)([-p])(\d+)$")
A = TypeVar("A")
B = TypeVar("B")


@dataclass
class SentenceLinks:
    """The links of one sentence pair: ``sure`` ⊆ ``possible``."""

    sure: set[Link]
    possible: set[Link]


def split_words(text: str) -> list[str]:
    """The words alignment positions index: the line split on ASCII spaces only. Gold sets keep other
    whitespace (e.g. U+3000 in the KFTT Japanese text) as tokens of their own."""
    return [word for word in text.strip("\n").split(" ") if word]


def parse_links(text: str, where: str, one_based: bool = False) -> SentenceLinks:
    """Parse one line of ``i-j`` (sure) and ``ipj`` (possible) tokens into 0-based links.

    Raises:
        InputError: naming ``where`` (file:line) for a token that is not a link, or a 0 in 1-based input.
    """
    sure: set[Link] = set()
    possible: set[Link] = set()
    offset = 1 if one_based else 0
    for token in text.split():
        match = _LINK.match(token)
        if not match:
            raise InputError(f"{where}: {token!r} is not an alignment link (expected i-j or ipj)")
        src, tgt = int(match.group(1)) - offset, int(match.group(3)) - offset
        if src < 0 or tgt < 0:
            raise InputError(f"{where}: {token!r}: positions are 1-based in this file")
        possible.add((src, tgt))
        if match.group(2) == "-":
            sure.add((src, tgt))
    return SentenceLinks(sure, possible)


def read_links(path: str | Path, one_based: bool = False) -> Iterator[SentenceLinks]:
    """The links of every line of a Pharaoh file (plain or ``.gz``), streamed; empty lines have none."""
    for number, text in iter_lines(path):
        yield parse_links(text, f"{path}:{number}", one_based)


def check_range(links: Iterable[Link], src_len: int, tgt_len: int | None, where: str) -> None:
    """Reject a link that points past the end of a sentence of ``src_len`` and ``tgt_len`` words
    (``tgt_len`` None: the target side is not checked).

    Raises:
        InputError: naming ``where`` and the offending link.
    """
    for src, tgt in links:
        if src >= src_len or (tgt_len is not None and tgt >= tgt_len):
            sizes = f"{src_len} and {tgt_len} words" if tgt_len is not None else f"{src_len} source words"
            raise InputError(f"{where}: link {src}-{tgt} is outside a pair of {sizes}")


def paired_lines(first: Iterable[A], second: Iterable[B], names: tuple[str, str]) -> Iterator[tuple[A, B]]:
    """The items of ``first`` and ``second`` (none of them None), one per line of the files ``names``, in pairs.

    Raises:
        InputError: naming both files and their line counts, once one has ended before the other.
    """
    counts = [0, 0]
    for a, b in zip_longest(first, second):
        counts[0] += a is not None
        counts[1] += b is not None
        if a is not None and b is not None:
            yield a, b
    if counts[0] != counts[1]:
        raise InputError(f"{names[0]} has {counts[0]} lines but {names[1]} has {counts[1]}")


def format_links(links: Iterable[Link]) -> str:
    """Links as one Pharaoh line, sorted, 0-based."""
    return " ".join(f"{src}-{tgt}" for src, tgt in sorted(links))
