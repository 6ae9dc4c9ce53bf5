"""Where float32 linear layers should multiply on this CPU: torch's BLAS against oneDNN (``ordo.gemm``, issue 28).

Two parts, each alternating the two backends in rounds so that drift on a shared host hits both:

- products: each linear layer of the recipes' ``small`` preset (d 256, FFN 1024, vocabulary 8,000) at the row
  counts ordo meets: a training batch (``--train-rows``, forward and backward, as ``ordo train`` runs them) and
  decoding (5 rows, one sentence's beam; 1,500, a large batch's beams; no gradient, oneDNN on packed weights, as
  ``ordo translate`` runs them); microseconds, the ratio BLAS / oneDNN (median over rounds), and the largest
  difference relative to the output's largest magnitude;
- training (``--corpus``): ``ordo train`` with the corpus's recipe from scratch, ``train.cpu_gemm=blas`` against
  ``onednn``, ``--warmup`` + ``--updates`` updates per run, target tokens/s over the updates after the warm-up
  (read from train.log as bench/fairseq_real.py does), and the dev loss of both at the end.

usage: python bench/cpu_gemm.py [--rounds 5] [--corpus multi30k] [--updates 100] [--warmup 25]
           [--out bench/results/cpu_gemm.md]
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

if not __package__:  # run as `python bench/NAME.py`: the repository root, not bench/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.fairseq_real import (
    CORPORA,
    ROOT,
    log,
    measured_rate,
    ordo_intervals,
    ordo_train_command,
    ordo_update_tokens,
    prepare_ordo,
    run_logged,
    thread_env,
    write_section,
)
from bench.machine import cpu_description
from ordo import gemm
from ordo.data.textio import read_lines

SHAPES = {  # layer -> (in, out) in the small preset
    "self-attention QKV": (256, 768),
    "attention out / cross-attention Q": (256, 256),
    "cross-attention KV": (256, 512),
    "FFN in": (256, 1024),
    "FFN out": (1024, 256),
    "output projection": (256, 8000),
}
BACKENDS = ("blas", "onednn")


def time_call(function: Callable[[], object], seconds: float = 0.3) -> float:
    """Microseconds per call of ``function`` over about ``seconds``, after one untimed call."""
    function()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        function()
        calls += 1
    return 1e6 * (time.perf_counter() - start) / calls


def product(backend: str, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, train: bool) -> Callable[[], None]:
    """One call as ordo makes it on ``backend``: forward and backward when ``train``, else a no-grad forward."""

    def call() -> None:
        with gemm.cpu_gemm(backend):
            if train:
                gemm.linear(x, weight, bias).sum().backward()
            else:
                with torch.inference_mode():
                    gemm.linear(x, weight, bias)

    return call


def products_table(train_rows: int, rounds: int) -> list[str]:
    """The products part (module docstring)."""
    lines = ["| layer (rows x in -> out) | pass | BLAS µs | oneDNN µs | BLAS / oneDNN | max rel. diff |",
             "|---|---|---:|---:|---:|---:|"]
    torch.manual_seed(0)
    for rows, train in ((train_rows, True), (5, False), (1500, False)):
        for name, (dim_in, dim_out) in SHAPES.items():
            x = torch.randn(rows, dim_in, requires_grad=train)
            weight = (torch.randn(dim_out, dim_in) * dim_in**-0.5).requires_grad_(train)
            bias = torch.zeros(dim_out, requires_grad=train)
            times: dict[str, list[float]] = {backend: [] for backend in BACKENDS}
            for index in range(rounds):
                for backend in BACKENDS if index % 2 == 0 else BACKENDS[::-1]:
                    times[backend].append(time_call(product(backend, x, weight, bias, train)))
            outputs = []
            for backend in BACKENDS:
                with gemm.cpu_gemm(backend), torch.no_grad():
                    outputs.append(gemm.linear(x, weight, bias))
            diff = float((outputs[0] - outputs[1]).abs().max() / outputs[0].abs().max())
            ratio = statistics.median(a / b for a, b in zip(times["blas"], times["onednn"]))
            lines.append(f"| {name} ({rows} x {dim_in} -> {dim_out}) | {'fwd+bwd' if train else 'no grad'} | "
                         f"{statistics.median(times['blas']):.0f} | {statistics.median(times['onednn']):.0f} | "
                         f"x{ratio:.2f} | {diff:.1e} |")
    return lines


def train_run(corpus_name: str, data_dir: Path, work: Path, backend: str, steps: int, interval: int,
              max_tokens: int, threads: int) -> tuple[dict[int, float], float]:
    """One ``ordo train`` run from scratch on ``backend``: (update -> tgt tok/s, final dev loss)."""
    run_dir = work / backend
    if run_dir.exists():  # an old run directory would be resumed
        shutil.rmtree(run_dir)
    work.mkdir(parents=True, exist_ok=True)
    command = ordo_train_command(CORPORA[corpus_name], data_dir, run_dir, max_tokens, steps, interval, threads)
    command += ["--set", f"train.cpu_gemm={backend}"]
    run_logged(command, work / f"{backend}.out", dict(os.environ) | thread_env(threads))
    valid = [line for line in read_lines(run_dir / "train.log") if "| valid |" in line]
    loss = float(valid[-1].split("| loss ")[1].split()[0])
    shutil.rmtree(run_dir / "checkpoints")
    return ordo_intervals(run_dir / "train.log"), loss


def training_table(args: argparse.Namespace) -> list[str]:
    """The training part (module docstring)."""
    corpus = CORPORA[args.corpus]
    data_dir = prepare_ordo(corpus, args.data_root, args.work)
    steps, interval = args.warmup + args.updates, math.gcd(args.warmup, args.updates)
    tokens = ordo_update_tokens(data_dir, args.max_tokens, 1, steps)
    rates: dict[str, list[float]] = {backend: [] for backend in BACKENDS}
    losses: dict[str, float] = {}
    for index in range(args.train_rounds):
        for backend in BACKENDS if index % 2 == 0 else BACKENDS[::-1]:
            log(f"training round {index + 1}: {backend}")
            intervals, losses[backend] = train_run(args.corpus, data_dir, args.work / args.corpus / "cpu_gemm", backend, steps,
                                                   interval, args.max_tokens, args.threads)
            measured = [(sum(tokens[end - interval:end]), rate) for end, rate in intervals.items() if end > args.warmup]
            rates[backend].append(measured_rate(measured))
    ratios = [b / a for a, b in zip(rates["blas"], rates["onednn"])]
    lines = [(f"{corpus.title}, {args.max_tokens} tokens per batch, {args.updates} measured updates after "
             f"{args.warmup}, {args.threads} threads, {args.train_rounds} rounds (alternating which goes first):"), "",
             "| backend | tgt tok/s per round | median | dev loss at the end |", "|---|---|---:|---:|"]
    for backend in BACKENDS:
        lines.append(f"| {backend} | {', '.join(f'{r:.0f}' for r in rates[backend])} | "
                     f"{statistics.median(rates[backend]):.0f} | {losses[backend]:.4f} |")
    lines += ["", f"oneDNN / BLAS: x{statistics.median(ratios):.2f} (rounds {min(ratios):.2f}-{max(ratios):.2f})"]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the products part")
    parser.add_argument("--train-rows", type=int, default=3000, help="rows of a training batch's products")
    parser.add_argument("--corpus", choices=list(CORPORA), help="also time ordo train on this corpus")
    parser.add_argument("--train-rounds", type=int, default=2)
    parser.add_argument("--updates", type=int, default=100, help="measured updates per training run")
    parser.add_argument("--warmup", type=int, default=25, help="updates per training run before the measured ones")
    parser.add_argument("--max-tokens", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "fairseq_real",
                        help="prepared data (shared with bench/fairseq_real.py) and the runs")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "cpu_gemm.md")
    args = parser.parse_args()
    if not gemm.onednn_available():
        parser.error("this torch has no oneDNN linear kernel: nothing to compare")
    args.work = args.work.resolve()
    torch.set_num_threads(args.threads)
    command = shlex.join(["python", "bench/cpu_gemm.py", *sys.argv[1:]])
    body = [f"command: `{command}`", "", (f"CPU: {cpu_description()}; torch {torch.__version__}; "
            f"{args.threads} threads; load average at the start {' '.join(f'{v:.2f}' for v in os.getloadavg())}"), "",
            f"Products, {args.rounds} rounds:", "", *products_table(args.train_rows, args.rounds)]
    if args.corpus:
        body += ["", *training_table(args)]
    body += ["", f"load average at the end {' '.join(f'{v:.2f}' for v in os.getloadavg())}"]
    text = "\n".join(body)
    write_section(args.out, "float32 linear layers: torch's BLAS against oneDNN", text)
    print(text)


if __name__ == "__main__":
    main()
