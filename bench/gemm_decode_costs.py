"""What `cpu_gemm: auto` costs in translation on this CPU (issue 44): oneDNN's kernel per row count, and the timing.

1. For each linear layer shape of a preset (``bench/cpu_defaults.py``'s ``layer_shapes``), products on oneDNN's
   packed weight at ``--rows`` row counts, each count the first time and then again, beside BLAS at the same
   counts, unpadded (``ordo.gemm._onednn_linear`` directly): the median microseconds of each, and how much the
   process's peak resident memory grew over those first-time counts. oneDNN builds and keeps a kernel for each row
   count it meets; beam search meets a new count whenever a sentence finishes, which is why ``ordo.gemm`` pads a
   oneDNN product's rows above 16.
2. With ``--run``: that run translates the first ``--sentences`` lines of ``--src`` twice per backend (beam 5)
   in one process, and for ``auto`` how many (shape, row bucket) keys ``ordo.gemm`` decided in each pass (it times
   a key on its own products: the first pass carries the timing, the second runs on the choices).

usage: python bench/gemm_decode_costs.py [--preset small] [--rows 20 120] [--run RUN_DIR --src FILE.gz]
           [--sentences 40] [--threads 2] [--out bench/results/gemm_decode_costs.md]
"""

from __future__ import annotations

import argparse
import functools
import gzip
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

if not __package__:  # run as `python bench/NAME.py`: the repository root first on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cpu_defaults import layer_shapes
from ordo import api, gemm


def peak_mb() -> float:
    """This process's peak resident memory so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def micros(product: Callable[[], torch.Tensor]) -> float:
    """Microseconds one call of ``product`` takes."""
    start = time.perf_counter()
    product()
    return 1e6 * (time.perf_counter() - start)


def kernel_rows(preset: str, vocab: int, rows: range) -> list[str]:
    """Table rows of part 1 (module docstring) for ``preset``'s layer shapes."""
    lines = []
    for layer, out_features, in_features, _ in layer_shapes(preset, vocab):
        weight, bias = torch.randn(out_features, in_features), torch.randn(out_features)
        packed = gemm._pack(weight)
        inputs = [torch.randn(count, in_features) for count in rows]
        before = peak_mb()
        onednn = [functools.partial(gemm._onednn_linear, x, packed, bias) for x in inputs]
        first = [micros(product) for product in onednn]
        grown = peak_mb() - before
        again = [micros(product) for product in onednn]
        blas = [micros(functools.partial(F.linear, x, weight, bias)) for x in inputs]
        lines.append(f"| {layer} ({out_features} x {in_features}) | {statistics.median(first):,.0f} | "
                     f"{statistics.median(again):,.0f} | {statistics.median(blas):,.0f} | {grown:.0f} |")
    return lines


def timing_rows(run_dir: Path, src: Path, sentences: int) -> list[str]:
    """Table rows of part 2 (module docstring): each backend's two passes over the first ``sentences`` lines."""
    with gzip.open(src, "rt", encoding="utf-8") if src.suffix == ".gz" else open(src, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for _, line in zip(range(sentences + 1), handle)]
    run = api.load_run(run_dir, "last", device="cpu")
    rows = []
    for backend in ("blas", "onednn", "auto"):
        run.translate(lines[-1:], beam_size=5, cpu_gemm=backend)  # loads and warms up
        for number in (1, 2):
            decided = len(gemm._choices)
            start = time.perf_counter()
            run.translate(lines[:sentences], beam_size=5, cpu_gemm=backend)
            seconds = time.perf_counter() - start
            rows.append(f"| {backend} | {number} | {sentences / seconds:.1f} | {seconds:.2f} | "
                        f"{len(gemm._choices) - decided} | {len(gemm._timings)} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--vocab", type=int, default=8000, help="the output projection's rows")
    parser.add_argument("--rows", type=int, nargs=2, default=[20, 120], metavar=("FIRST", "END"))
    parser.add_argument("--run", type=Path, help="a trained run for part 2")
    parser.add_argument("--src", type=Path, help="source lines for part 2 (text or .gz)")
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench/results/gemm_decode_costs.md"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    text = [f"command: `python bench/gemm_decode_costs.py {' '.join(sys.argv[1:])}`", "",
            (f"oneDNN products on packed weights at {args.rows[0]}-{args.rows[1] - 1} rows ({args.preset} preset, "
             f"{args.threads} threads; median us):"), "",
            "| layer | oneDNN, first time at each row count | oneDNN, again | BLAS | peak MB grown over the first times |",
            "|---|---:|---:|---:|---:|", *kernel_rows(args.preset, args.vocab, range(*args.rows))]
    if args.run and args.src:
        text += ["", (f"`{args.run}` translating {args.sentences} sentences, beam 5, two passes per backend in one "
                      "process (auto: the keys ordo.gemm decided in the pass, and those still being timed after it):"),
                 "", "| backend | pass | sent/s | seconds | keys decided | keys being timed |",
                 "|---|---:|---:|---:|---:|---:|",
                 *timing_rows(args.run, args.src, args.sentences)]
    args.out.write_text("\n".join(text) + "\n", encoding="utf-8")
    print("\n".join(text))


if __name__ == "__main__":
    main()
