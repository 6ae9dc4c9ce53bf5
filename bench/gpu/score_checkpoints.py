"""Time to quality of one training run: every kept checkpoint scored on a test set, against its training time.

Each ``step_N.pt`` of ``RUN`` translates ``--src`` (the run's decode settings: beam search) and is scored
against ``--ref`` with sacreBLEU; its training time is the checkpoint's own record (wall time spent in
updates, compilation included, validation excluded). Then the last ``--average`` checkpoints are averaged and
scored on every ``--test NAME SRC REF``. Prints markdown: the curve, the first checkpoint that reaches each
``--target`` BLEU, and the averaged model's scores.

usage: python bench/gpu/score_checkpoints.py RUN --src test2016.en --ref test2016.de --target 36.60 39.6
           [--average 4] [--test test2016 test2016.en test2016.de --test test2017 test2017.en test2017.de]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ordo import api
from ordo.checkpoint import load_checkpoint, step_checkpoints
from ordo.data.textio import read_lines
from ordo.evaluation.bleu import corpus_scores


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--ref", type=Path, required=True)
    parser.add_argument("--target", type=float, nargs="*", default=[])
    parser.add_argument("--average", type=int, default=4)
    parser.add_argument("--test", nargs=3, action="append", default=[], metavar=("NAME", "SRC", "REF"))
    return parser.parse_args()


def bleu_of(run_dir: Path, checkpoint: str, src: Path, ref: Path) -> float:
    """sacreBLEU of ``checkpoint`` of ``run_dir`` translating ``src`` against ``ref``."""
    run = api.load_run(run_dir, checkpoint)
    return float(corpus_scores(run.translate(read_lines(src)), read_lines(ref))["bleu"])


def main() -> None:
    args = parse_args()
    lines = ["| update | training s | BLEU |", "|---:|---:|---:|"]
    curve = []
    for path in step_checkpoints(args.run / "checkpoints"):
        progress = load_checkpoint(path)["progress"]
        bleu = bleu_of(args.run, str(path), args.src, args.ref)
        curve.append((progress["train_seconds"], progress["step"], bleu))
        lines.append(f"| {progress['step']} | {progress['train_seconds']:.0f} | {bleu:.2f} |")
    lines.append("")
    for target in args.target:
        reached = next(((s, step) for s, step, bleu in curve if bleu >= target), None)
        lines.append(f"- BLEU {target:.2f} on {args.src.name}: " + (
            f"{reached[0]:.0f} s of training (update {reached[1]})" if reached else "not reached"))
    if args.test:
        api.average(args.run, last=args.average)
        for name, src, ref in args.test:
            bleu = bleu_of(args.run, "averaged", Path(src), Path(ref))
            lines.append(f"- average of the last {args.average} checkpoints, {name}: BLEU {bleu:.2f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
