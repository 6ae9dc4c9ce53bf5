"""Sharing 2 cores between training runs: one run with 2 threads against two runs side by side with 1 each.

A queue of comparisons (``recipes/replicate.py``) trains many small models one after the other. On a machine of
few cores a small model's products do not keep every thread busy, so two runs of one thread each may train
more updates per hour in all than one run of two. This trains ``--updates`` updates of one config first alone
with ``--threads`` threads, then twice side by side with one thread each (seeds 1 and 2), each in its own
process with ``OMP_WAIT_POLICY=PASSIVE``, and reports each run's target tokens per second from its log (the
trainer's own figure, over its training steps) and the ratio of the pair's sum to the single run's.

usage: python bench/threads_split.py --config recipes/enja_verdict/train.yaml --data PREPARED [--updates 120]
       [--threads 2] [--out bench/results/threads_split.md]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DONE_LINE = re.compile(r"done: .* ([0-9.]+) tgt tok/s")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True, help="train config (YAML)")
    parser.add_argument("--data", type=Path, required=True, help="folder written by ordo prepare")
    parser.add_argument("--updates", type=int, default=120)
    parser.add_argument("--threads", type=int, default=2, help="threads of the single run (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "threads_split.md")
    return parser.parse_args()


def start(args: argparse.Namespace, out: Path, threads: int, seed: int) -> subprocess.Popen:
    """One ``ordo train`` of ``args.updates`` updates without validation, logging to ``out/train.log``."""
    ordo = str(Path(sys.executable).parent / "ordo")
    settings = [f"train.max_steps={args.updates}", "train.valid_every=1000000", f"train.threads={threads}",
                f"train.seed={seed}", "train.keep_last=1", "train.progress=false"]
    command = [ordo, "train", str(args.config), "--data", str(args.data), "--out", str(out)]
    command += [part for setting in settings for part in ("--set", setting)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})


def tokens_per_second(run: subprocess.Popen, out: Path) -> float:
    """Wait for ``run``; its target tokens per second from the last line of ``out/train.log``."""
    _, stderr = run.communicate()
    if run.returncode != 0:
        sys.exit(f"ordo train failed:\n{stderr[-2000:]}")
    return float(DONE_LINE.findall((out / "train.log").read_text(encoding="utf-8"))[-1])


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory() as work:
        alone = tokens_per_second(start(args, Path(work) / "alone", args.threads, 1), Path(work) / "alone")
        pair = [(start(args, Path(work) / f"side{seed}", 1, seed), Path(work) / f"side{seed}") for seed in (1, 2)]
        side = [tokens_per_second(run, out) for run, out in pair]
    command = "python bench/threads_split.py " + shlex.join(["--config", str(args.config), "--data", "DATA",
                                                              "--updates", str(args.updates),
                                                              "--threads", str(args.threads)])
    report = (f"| runs | threads each | target tokens/s |\n|---|---:|---:|\n"
              f"| one | {args.threads} | {alone:.0f} |\n"
              f"| two side by side | 1 | {side[0]:.0f} + {side[1]:.0f} = {sum(side):.0f} |\n\n"
              f"Two runs of one thread train {sum(side) / alone:.2f}x the tokens per second of one run of "
              f"{args.threads}. {os.cpu_count()} CPUs; `{command}`\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    print(report, end="")


if __name__ == "__main__":
    main()
