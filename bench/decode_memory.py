"""Where a beam search's peak memory goes with ``cpu_gemm`` blas and onednn (issue 44): the packed weights or
oneDNN's kernel caches.

For a trained run, each variant translates the first ``--sentences`` sentences of Multi30k test2016 (beam 5,
float32) in a fresh process, its first translation, as ``ordo translate`` would:

- ``blas``: torch's BLAS;
- ``blas, weights packed``: every linear layer's weight packed for oneDNN first, then BLAS: what the packed
  copies alone cost;
- ``onednn``: oneDNN on the packed weights;
- ``onednn, no caches``: the same with oneDNN's and torch's (ideep's) kernel caches off
  (``ONEDNN_PRIMITIVE_CACHE_CAPACITY=0``, ``LRU_CACHE_CAPACITY=1``): what the cached kernels cost;
- ``auto``: the default.

Each process reports its peak resident memory (``VmHWM``) after loading the run and after the translation,
its resident memory after each, the seconds of the translation and the MB of packed copies it holds. Rounds
alternate the variants' order; the report gives each figure's median over the rounds and the translation's
peak over BLAS's. Memory does not depend on how busy the machine is; the seconds do.

usage: python bench/decode_memory.py --run RUN_DIR [--sentences 40] [--rounds 3] [--threads 1]
           [--out bench/results/decode_memory.md]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as `python bench/decode_memory.py`: the repository root, not bench/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.machine import cpu_description

ROOT = Path(__file__).resolve().parents[1]
TEST_SOURCE = ROOT.parent / "shared" / "data" / "multi30k" / "test2016.en.gz"
NO_CACHES = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0", "LRU_CACHE_CAPACITY": "1"}
VARIANTS = {  # name -> (cpu_gemm, pack every weight first, environment)
    "blas": ("blas", False, {}),
    "blas, weights packed": ("blas", True, {}),
    "onednn": ("onednn", False, {}),
    "onednn, no caches": ("onednn", False, NO_CACHES),
    "auto": ("auto", False, {}),
}
FIGURES = (("load_peak", "peak after loading, MB"), ("load_rss", "resident after loading, MB"),
           ("peak", "peak after the translation, MB"), ("rss", "resident after it, MB"),
           ("packed_mb", "packed copies, MB"), ("seconds", "translation, s"))


def memory() -> dict[str, float]:
    """This process's peak and current resident memory in MB (``/proc/self/status``)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {"peak": int(fields["VmHWM"].split()[0]) / 1024, "rss": int(fields["VmRSS"].split()[0]) / 1024}


def child(run_dir: str, backend: str, pack_first: bool, sentences: int, result: str) -> None:
    """One variant's process (module docstring): the figures as JSON to ``result``."""
    import torch

    from ordo import api, gemm
    from ordo.decoding.packed import FrozenLinear

    run = api.load_run(run_dir, "last", device="cpu")
    loaded = memory()
    if pack_first:
        for module in run.model.modules():
            if isinstance(module, (torch.nn.Linear, FrozenLinear)):
                gemm.packed_weight(module.weight)
    with gzip.open(TEST_SOURCE, "rt", encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for _, line in zip(range(sentences), handle)]
    start = time.perf_counter()
    run.translate(lines, beam_size=5, cpu_gemm=backend)
    seconds = time.perf_counter() - start
    copies = [entry[2] for entry in gemm._packed_frozen.values()]  # beside their plain weights
    copies += [module.packed for module in run.model.modules() if isinstance(module, FrozenLinear) and module.packed is not None]
    packed_mb = sum(packed.numel() * 4 for packed in copies) / 2**20
    figures = {"load_peak": loaded["peak"], "load_rss": loaded["rss"], **memory(), "packed_mb": packed_mb,
               "seconds": seconds}
    Path(result).write_text(json.dumps(figures))


def measure(args: argparse.Namespace, name: str) -> dict[str, float]:
    """One fresh process of variant ``name``; its figures."""
    backend, pack_first, extra_env = VARIANTS[name]
    result = args.work / "figures.json"
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(args.run), backend,
               str(int(pack_first)), str(args.sentences), str(result)]
    threads = {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    completed = subprocess.run(command, check=False, cwd=ROOT, env=dict(os.environ) | threads | extra_env,
                               capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} exited with {completed.returncode}:\n{completed.stderr[-2000:]}")
    return json.loads(result.read_text())


def commit() -> str:
    """The repository's commit, with ``+changes`` where the tree differs from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.strip()
    return head + ("+changes" if dirty else "")


def report(args: argparse.Namespace, rounds: dict[str, list[dict[str, float]]]) -> str:
    """The Markdown report: each figure's median per variant, and the translation's peak over BLAS's."""
    command = "python bench/decode_memory.py " + shlex.join(sys.argv[1:])
    medians = {name: {key: statistics.median(r[key] for r in runs) for key, _ in FIGURES}
               for name, runs in rounds.items()}
    blas_peak = medians["blas"]["peak"]
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    lines = ["## Beam search's peak memory: packed weights and oneDNN's kernel caches", "",
             f"command: `{command}` at {commit()}", "", f"CPU: {cpu_description()}; {args.threads} thread(s)", "",
             (f"Run {args.run.name}, beam 5 over the first {args.sentences} sentences of test2016 in one call, the "
             f"first translation of a fresh process; medians of {args.rounds} rounds (variant order rotating). "
             f"Load average at the end: {load} (the seconds need a quiet machine; memory does not)."), "",
             "| variant | " + " | ".join(label for _, label in FIGURES) + " | peak / blas's |",
             "|---|" + "---:|" * (len(FIGURES) + 1)]
    for name, figure in medians.items():
        cells = [f"{figure[key]:.2f}" if key == "seconds" else f"{figure[key]:.0f}" for key, _ in FIGURES]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {figure['peak'] / blas_peak:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Measure every variant for ``--rounds`` rounds and write the report."""
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        run_dir, backend, pack_first, sentences, result = sys.argv[2:7]
        child(run_dir, backend, pack_first == "1", int(sentences), result)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="a trained run directory")
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "decode_memory.md")
    args = parser.parse_args()
    args.work = Path(tempfile.mkdtemp(prefix="ordo-decode-memory-"))
    names = list(VARIANTS)
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for index in range(args.rounds):
        for name in names[index % len(names):] + names[:index % len(names)]:
            rounds[name].append(measure(args, name))
            print(f"round {index + 1}: {name}: {rounds[name][-1]}", file=sys.stderr)
    text = report(args, rounds)
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
