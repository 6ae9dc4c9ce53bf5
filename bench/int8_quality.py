"""What ``ordo translate --int8`` costs in quality and buys in speed, on trained runs and a real test set.

Each run translates the test set twice in one process, float32 then int8 (dynamic int8 projections,
:mod:`ordo.decoding.quantize`), with the run's decoding settings; the table gives BLEU, the sign test of int8
against float32, the share of identical outputs, and sentences/s of both with their ratio.

usage: python bench/int8_quality.py --src TEST.src --ref TEST.ref [--tokenized] [--checkpoint averaged]
           [--out bench/results/int8_quality.md] NAME=RUN_DIR [NAME=RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from ordo.analysis.systems import translate_timed
from ordo.api import load_run
from ordo.data.textio import atomic_write, read_lines
from ordo.evaluation.bleu import corpus_scores
from ordo.evaluation.significance import sign_test


def measure(run_dir: Path, sources: list[str], refs: list[str], checkpoint: str, tokenized: bool) -> list[str]:
    """Table cells for one run: BLEU fp32, BLEU int8, sign p, identical %, sent/s fp32, int8, ratio."""
    key = "tok_bleu" if tokenized else "bleu"
    outputs, speeds, bleus = [], [], []
    for int8 in (False, True):
        run = load_run(run_dir, checkpoint, "cpu", int8=int8)
        hyps, seconds = translate_timed(run, sources)
        outputs.append(hyps)
        speeds.append(len(sources) / seconds)
        bleus.append(float(corpus_scores(hyps, refs, tokenized_bleu=tokenized)[key]))
    same = sum(a == b for a, b in zip(*outputs)) / len(sources)
    p_value = sign_test(outputs[0], outputs[1], refs).p_value
    return [f"{bleus[0]:.2f}", f"{bleus[1]:.2f}", f"{p_value:.3g}", f"{100 * same:.0f}%",
            f"{speeds[0]:.1f}", f"{speeds[1]:.1f}", f"x{speeds[1] / speeds[0]:.2f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="NAME=RUN_DIR")
    parser.add_argument("--src", required=True, type=Path)
    parser.add_argument("--ref", required=True, type=Path)
    parser.add_argument("--tokenized", action="store_true", help="multi-bleu.perl BLEU on pre-tokenized text")
    parser.add_argument("--checkpoint", default="averaged")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "int8_quality.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sources, refs = read_lines(args.src), read_lines(args.ref)
    command = f"command: `python bench/int8_quality.py {' '.join(sys.argv[1:])}`"
    lines = [f"{command} (torch {torch.__version__}, {args.threads} threads)", "",
             "| run | BLEU fp32 | BLEU int8 | sign p | identical | sent/s fp32 | sent/s int8 | int8/fp32 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, run_dir in (item.split("=", 1) for item in args.runs):
        lines.append("| " + " | ".join([name, *measure(Path(run_dir), sources, refs, args.checkpoint, args.tokenized)]) + " |")
        print(lines[-1], file=sys.stderr)
    with atomic_write(args.out) as handle:
        handle.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
