"""Lattice relations (paper 002 §3): computed per batch from the spans, or stored per sentence?

Issue 7 asks which is faster. Both give the (B, S, S) relation ids that lattice-aware self-attention reads:

- **computed** (what ordo does): ``collate`` pads the per-edge spans (2 int32 per edge, the ``lattice_start``
  and ``lattice_end`` fields), then :func:`ordo.methods.lattice_attn.lattice_relations` derives every pair's
  relation with broadcast comparisons;
- **stored**: every sentence's n×n relation matrix is computed once at prepare time and kept (uint8, n² bytes
  per sentence of n edges plus EOS), and a batch copies each sentence's matrix into a padded (B, S, S) tensor.

Lattices are built with :func:`ordo.data.lattice.graph.build_lattice` from K random segmentations of random
strings, at three sizes; batches hold about 3,000 edges (the training configs' token budget). Each figure is
the median over rounds of the time to collate a batch with its relation ids (the token collation is the same
in both), and the bytes stored per sentence.

usage: python bench/lattice_relations.py [--threads 2] [--rounds 20] [--out bench/results/lattice_relations.md]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ordo.data.batch import Batch
from ordo.data.batching import collate
from ordo.data.lattice.graph import FIELD_END, FIELD_START, Lattice, batch_spans, build_lattice
from ordo.data.textio import atomic_write
from ordo.methods.lattice_attn import lattice_relations

TOKENS_PER_BATCH = 3000
SHAPES = {  # name -> (characters per sentence, mean token lengths of the K segmentations)
    "short, 3 subword segmentations": (12, (2.0, 3.0, 4.0)),
    "medium, chars + 3 word segmentations": (24, (1.0, 1.6, 2.0, 2.6)),
    "long, chars + 3 word segmentations": (70, (1.0, 1.6, 2.0, 2.6)),
}


def random_segmentation(text: str, mean_length: float, rng: random.Random) -> list[str]:
    """Cut ``text`` into pieces whose lengths are 1 + Poisson-like draws around ``mean_length``."""
    pieces, offset = [], 0
    while offset < len(text):
        length = 1 + int(rng.expovariate(1 / max(mean_length - 1, 1e-6))) if mean_length > 1 else 1
        pieces.append(text[offset : offset + length])
        offset += length
    return pieces


def random_lattices(
    chars: int, mean_lengths: tuple[float, ...], count: int, seed: int, spread: float = 0.25
) -> list[Lattice]:
    """``count`` lattices of sentences of ``chars`` characters on average (standard deviation ``spread`` x
    ``chars``)."""
    rng = random.Random(seed)
    lattices = []
    for _ in range(count):
        text = "".join(rng.choice("abcdefghij") for _ in range(max(2, int(rng.gauss(chars, spread * chars)))))
        lattices.append(build_lattice([random_segmentation(text, m, rng) for m in mean_lengths]))
    return lattices


def span_batch(lattices: list[Lattice], with_spans: bool = True) -> Batch:
    """Collate the lattices like the training loader does (the tokens are irrelevant here: all 5)."""
    rows = [np.full(len(lattice), 5, dtype=np.int32) for lattice in lattices]
    fields = {
        FIELD_START: [np.asarray(lattice.starts, dtype=np.int32) for lattice in lattices],
        FIELD_END: [np.asarray(lattice.ends, dtype=np.int32) for lattice in lattices],
    }
    return collate(np.arange(len(lattices)), rows, rows, fields if with_spans else None)


def stored_matrix(lattice: Lattice) -> np.ndarray:
    """A sentence's relation matrix as prepare time would store it (EOS included), uint8."""
    batch = span_batch([lattice])
    return lattice_relations(*batch_spans(batch))[0].to(torch.uint8).numpy()


def from_storage(lattices: list[Lattice], matrices: list[np.ndarray]) -> torch.Tensor:
    """The stored approach's batch: collate the tokens, pad each sentence's matrix into (B, S, S)."""
    span_batch(lattices, with_spans=False)
    size = max(len(matrix) for matrix in matrices)
    relations = np.zeros((len(matrices), size, size), dtype=np.uint8)
    for row, matrix in enumerate(matrices):
        relations[row, : len(matrix), : len(matrix)] = matrix
    return torch.from_numpy(relations).long()


def from_spans(lattices: list[Lattice]) -> torch.Tensor:
    """ordo's approach: collate the tokens and spans, derive the relation ids."""
    return lattice_relations(*batch_spans(span_batch(lattices)))


def median_ms(work: Callable[[], object], rounds: int) -> float:
    work()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def measure(name: str, chars: int, mean_lengths: tuple[float, ...], rounds: int) -> dict:
    probe = random_lattices(chars, mean_lengths, 64, seed=0)
    mean_edges = sum(len(lattice) for lattice in probe) / len(probe)
    size = max(1, int(TOKENS_PER_BATCH / (mean_edges + 1)))
    lattices = random_lattices(chars, mean_lengths, size, seed=1)
    matrices = [stored_matrix(lattice) for lattice in lattices]
    computed, stored = from_spans(lattices), from_storage(lattices, matrices)
    for row, matrix in enumerate(matrices):  # padding is masked by attention: compare real tokens only
        assert torch.equal(computed[row, : len(matrix), : len(matrix)], stored[row, : len(matrix), : len(matrix)])
    return {
        "shape": name,
        "edges": mean_edges,
        "batch": size,
        "computed_ms": median_ms(lambda: from_spans(lattices), rounds),
        "stored_ms": median_ms(lambda: from_storage(lattices, matrices), rounds),
        "computed_bytes": 8 * mean_edges,
        "stored_bytes": sum(m.size for m in matrices) / len(matrices),
    }


def report(rows: list[dict], command: str, threads: int) -> str:
    lines = [
        "# Lattice relations: computed per batch vs stored per sentence",
        "",
        f"Command: `{command}` ({threads} torch threads, torch {torch.__version__}). Time to produce one batch's",
        "(B, S, S) relation ids, token collation included, median over rounds; storage per sentence: the spans (2 int32 per edge) against",
        "the uint8 relation matrix. Both give identical ids on every real token pair (checked).",
        "",
        "| lattices | mean edges | batch | computed ms | stored ms | computed / stored | bytes computed | bytes stored |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['shape']} | {row['edges']:.0f} | {row['batch']} | {row['computed_ms']:.2f} | "
            f"{row['stored_ms']:.2f} | {row['computed_ms'] / row['stored_ms']:.2f} | {row['computed_bytes']:.0f} | "
            f"{row['stored_bytes']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "lattice_relations.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = [measure(name, chars, lengths, args.rounds) for name, (chars, lengths) in SHAPES.items()]
    text = report(rows, "python " + " ".join(sys.argv), args.threads)
    with atomic_write(args.out) as handle:
        handle.write(text)
    print(text)


if __name__ == "__main__":
    main()
