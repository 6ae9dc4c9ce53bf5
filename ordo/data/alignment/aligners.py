"""Word aligners behind ``ordo align``: eflomal (Östling & Tiedemann 2016) and fast_align (Dyer et al. 2013,
through the ``systran-align`` package), each run in both directions and symmetrized.

Text goes to the aligners through files, and their link files are read back one line at a time, so ordo
never holds the corpus in Python lists (eflomal keeps its own compact arrays in C). Both aligners see
whitespace tokens; an empty side (which eflomal rejects) gets no links.

fast_align gives the same links at every run on a corpus: its EM estimation runs on one thread
(:func:`_fast_align_tables`), and its wheel is one prebuilt binary for every machine. eflomal's Gibbs sampler seeds itself from the system at every run, so two runs
draw different links, and its wheel is compiled for the machine that installs it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from ordo.data.alignment.links import Link, format_links, paired_lines, read_links, split_words
from ordo.data.alignment.symmetrize import SYMMETRIZATIONS
from ordo.data.textio import atomic_write, iter_lines
from ordo.errors import ConfigError, OrdoError, import_extra

logger = logging.getLogger("ordo.align")

ALIGNER_MODULES = {"eflomal": ("eflomal", "align"), "fast_align": ("systran_align", "fast_align")}
"""Each aligner's Python module and the extra of ordo that installs it (``pip install 'ordo[align]'``)."""

ALIGNERS = tuple(ALIGNER_MODULES)


def aligner_module(aligner: str) -> ModuleType:
    """The Python module behind ``aligner`` (one of :data:`ALIGNERS`).

    Raises:
        ConfigError: for an unknown aligner.
        MissingExtraError: naming the extra of ordo that installs it, when it is not installed.
    """
    if aligner not in ALIGNER_MODULES:
        raise ConfigError(f"unknown aligner {aligner!r} (choose from {', '.join(ALIGNERS)})")
    module, extra = ALIGNER_MODULES[aligner]
    return import_extra(module, extra)


def _aligner_line(text: str) -> str:
    """The words of ``text`` (:func:`split_words`) with any other whitespace inside a word replaced, so an
    aligner that splits on all whitespace sees the same words; a placeholder word on an empty line."""
    words = ["".join("_" if ch.isspace() else ch for ch in word) for word in split_words(text)]
    return " ".join(words) or "<empty>"


def _write_sides(src: Path, tgt: Path, workdir: Path) -> tuple[Path, Path, int, set[int]]:
    """Copy both sides (plain or .gz) to plain files, a placeholder token on empty lines; returns the files,
    the number of pairs and the 0-based indices of the pairs with an empty side.

    Raises:
        InputError: naming both files and their line counts when these differ.
    """
    src_out, tgt_out = workdir / "src.txt", workdir / "tgt.txt"
    count, empty = 0, set[int]()
    with open(src_out, "w", encoding="utf-8") as s_handle, open(tgt_out, "w", encoding="utf-8") as t_handle:
        for (_, s_text), (_, t_text) in paired_lines(iter_lines(src), iter_lines(tgt), (str(src), str(tgt))):
            if not split_words(s_text) or not split_words(t_text):
                empty.add(count)
            s_handle.write(_aligner_line(s_text) + "\n")
            t_handle.write(_aligner_line(t_text) + "\n")
            count += 1
    return src_out, tgt_out, count, empty


def _run_eflomal(src: Path, tgt: Path, forward: Path, backward: Path) -> None:
    eflomal = aligner_module("eflomal")
    with open(src, encoding="utf-8") as s_handle, open(tgt, encoding="utf-8") as t_handle:
        eflomal.Aligner().align(s_handle, t_handle, links_filename_fwd=str(forward), links_filename_rev=str(backward),
                                quiet=True)


FAST_ALIGN_TABLES = ("import sys, systran_align; systran_align.generate_alignment_probabilities(*sys.argv[1:], "
                     "favor_diagonal=True, optimize_tension=True)")
"""fast_align's EM estimation of both directions' lexical tables and diagonal tension (Dyer et al. 2013, §2-3)."""


def _fast_align_tables(joint: Path, forward_probs: Path, backward_probs: Path) -> None:
    """Write fast_align's tables for the ``src ||| tgt`` file ``joint`` (:data:`FAST_ALIGN_TABLES`) in a child
    process on one OpenMP thread. On several threads the EM sums come out in another order at every run, and a
    few links change (55 of 50,000 Ja-En pairs on 2 threads); the package's OpenMP runtime reads its thread
    count once, when it is loaded, hence the child.

    Raises:
        OrdoError: with the child's error output when the estimation fails.
    """
    child = subprocess.run([sys.executable, "-c", FAST_ALIGN_TABLES, str(joint), str(forward_probs),
                            str(backward_probs)], check=False, env={**os.environ, "OMP_NUM_THREADS": "1"},
                           capture_output=True, text=True)
    if child.returncode != 0:
        raise OrdoError(f"fast_align failed on {joint}: {child.stderr.strip()[-2000:]}")


def _run_fast_align(src: Path, tgt: Path, forward: Path, backward: Path) -> None:
    systran_align = aligner_module("fast_align")
    joint = src.parent / "joint.txt"
    with open(src, encoding="utf-8") as s_handle, open(tgt, encoding="utf-8") as t_handle, \
            open(joint, "w", encoding="utf-8") as out:
        out.writelines(f"{s.strip()} ||| {t.strip()}\n" for s, t in zip(s_handle, t_handle))
    fwd_probs, bwd_probs = src.parent / "fwd.probs", src.parent / "bwd.probs"
    _fast_align_tables(joint, fwd_probs, bwd_probs)
    aligner = systran_align.Aligner(str(fwd_probs), str(bwd_probs))
    with open(src, encoding="utf-8") as s_handle, open(tgt, encoding="utf-8") as t_handle, \
            open(forward, "w") as f_out, open(backward, "w") as b_out:
        for s, t in zip(s_handle, t_handle):
            result = aligner.align(s.split(), t.split())
            f_out.write(format_links(result["forward_alignments"] if "forward_alignments" in result
                                     else result["alignments"]) + "\n")
            b_out.write(format_links(result.get("backward_alignments", result["alignments"])) + "\n")


def align_files(
    src: str | Path, tgt: str | Path, aligner: str = "eflomal", symmetrization: str = "grow-diag-final-and",
) -> Iterator[set[Link]]:
    """Symmetrized links (0-based, source-target) of every line pair of ``src`` and ``tgt``, streamed.

    Raises:
        ConfigError: for an unknown aligner or symmetrization.
        MissingExtraError: when the aligner's package is missing (naming the extra of ordo that installs it).
        InputError: when the files differ in line count.
    """
    aligner_module(aligner)  # fail before the corpus is copied
    if symmetrization not in SYMMETRIZATIONS:
        raise ConfigError(f"unknown symmetrization {symmetrization!r} (choose from {', '.join(SYMMETRIZATIONS)})")
    combine = SYMMETRIZATIONS[symmetrization]
    with tempfile.TemporaryDirectory(prefix="ordo-align-") as tmp:
        workdir = Path(tmp)
        plain_src, plain_tgt, count, empty = _write_sides(Path(src), Path(tgt), workdir)
        forward, backward = workdir / "forward.links", workdir / "backward.links"
        logger.info("aligning %d sentence pairs with %s (%s)", count, aligner, symmetrization)
        (_run_eflomal if aligner == "eflomal" else _run_fast_align)(plain_src, plain_tgt, forward, backward)
        for index, (fwd, bwd) in enumerate(zip(read_links(forward), read_links(backward))):
            yield set() if index in empty else combine(fwd.sure, bwd.sure)


def write_alignment(src: str | Path, tgt: str | Path, out: str | Path, aligner: str = "eflomal",
                    symmetrization: str = "grow-diag-final-and") -> int:
    """:func:`align_files` into a Pharaoh file ``out`` (atomically); returns the number of lines."""
    lines = 0
    with atomic_write(out) as handle:
        for links in align_files(src, tgt, aligner, symmetrization):
            handle.write(format_links(links) + "\n")
            lines += 1
    return lines
