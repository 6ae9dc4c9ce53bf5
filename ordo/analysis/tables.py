"""Markdown and TSV tables of analysis results."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ordo.data.textio import atomic_write

Cell = str | int | float | None


def format_cell(value: Cell) -> str:
    """Floats with two decimals, None as a dash, everything else as ``str``."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(format_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_tables(stem: str | Path, headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    """Write ``stem.md`` and ``stem.tsv`` (full precision) atomically; returns the markdown."""
    text = markdown_table(headers, rows)
    with atomic_write(Path(f"{stem}.md")) as handle:
        handle.write(text)
    with atomic_write(Path(f"{stem}.tsv")) as handle:
        handle.write("\t".join(headers) + "\n")
        handle.writelines("\t".join("" if c is None else str(c) for c in row) + "\n" for row in rows)
    return text
