"""What the papers' claims cost at the papers' own scale: H100-hours per run and per verdict, ordo and fairseq.

A run is the recipe's budget (recipes/*/train.yaml: updates x tokens per update, the token budget counting the
longer side of each padded pair); ``TARGET_SHARE`` of that budget is real target tokens (0.84-0.88 measured on
Multi30k's batches at 4,096 and 25,000 tokens). Time is those target tokens at the throughput measured on one
H100 for the base preset at 25,000 tokens per batch, ordo against fairseq 0.12 ``--fp16`` in the same call
(bench/RESULTS.md, "Against fairseq on the H100"; rerun with bench/gpu/check.sh), times each method's measured
cost over the baseline (bench/RESULTS.md, "Method cost": CPU figures, the GPU's may differ). A verdict is every
system of the claims on that corpus (the baseline shared) at ``SEEDS`` seeds each, the count recipes/verdicts.yaml
uses. Not counted: data preparation, validation, translation and scoring (minutes, not hours).

usage: python bench/gpu_hours.py [--out bench/results/gpu_hours.md]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from ordo.data.textio import atomic_write

ORDO_TOKENS_PER_S = 311_000  # median of 294-328k target tokens/s, base preset, 25,000 tokens, 8k pieces, one H100
FAIRSEQ_TOKENS_PER_S = 143_000  # fairseq 0.12 --fp16, same call, same pieces and batch size
TARGET_SHARE = 0.86
SEEDS = 6
# training time of each system over the baseline's (bench/RESULTS.md, "Method cost": 1 / its speed ratio)
COST = {"baseline": 1.0, "both REs": 1 / 0.91, "ExGRE": 1 / 0.97, "ReFSR": 1 / 0.74, "future cost I": 1 / 0.80,
        "future cost II": 1 / 0.80, "lattice (LPE+LSA)": 1 / 0.67}


@dataclass
class Corpus:
    """A paper's corpus at its own scale and the run ordo's recipe gives it."""

    name: str
    pairs: str
    recipe: str  # the recipe (or the budget assumed where there is none)
    updates: int
    tokens_per_update: int
    systems: list[str]  # the baseline and the methods the papers claim gains for on it
    papers: str


CORPORA = [
    Corpus("WMT14 En-De", "4.5M", "recipes/wmt14_ende", 100_000, 4096 * 6,
           ["baseline", "both REs", "ExGRE", "ReFSR", "future cost I", "future cost II"], "000, 001, 004"),
    Corpus("ASPEC Ja-En", "2M (licensed)", "recipes/aspec_jaen", 100_000, 4096 * 6,
           ["baseline", "both REs", "ExGRE", "ReFSR"], "000, 001"),
    Corpus("KFTT Ja-En", "440k", "recipes/kftt_jaen", 60_000, 4096 * 2,
           ["baseline", "both REs", "ExGRE", "ReFSR"], "(the Ja-En claims on a public corpus)"),
    Corpus("NIST Zh-En", "1.25M (licensed)", "no recipe yet: WMT14's budget assumed", 100_000, 4096 * 6,
           ["baseline", "both REs", "lattice (LPE+LSA)"], "001, 002 (and 003's RNN, not counted: no GPU figure)"),
    Corpus("IWSLT14 De-En", "160k", "recipes/iwslt14_deen", 50_000, 4096,
           ["baseline", "lattice (LPE+LSA)"], "002 (its IWSLT16 En-De claim, on the nearest public set)"),
]


HEADER = ("| corpus (pairs) | papers | run (recipe) | one baseline run, ordo / fairseq H100-h | systems x seeds "
          "| whole verdict, ordo / fairseq H100-h |")


def hours(target_tokens: float, tokens_per_s: float) -> float:
    """Hours to train on ``target_tokens`` at ``tokens_per_s``."""
    return target_tokens / tokens_per_s / 3600


def table() -> str:
    """The markdown table, one row per corpus."""
    rows = [HEADER, "|---|---|---|---:|---|---:|"]
    for corpus in CORPORA:
        target_tokens = corpus.updates * corpus.tokens_per_update * TARGET_SHARE
        base = hours(target_tokens, ORDO_TOKENS_PER_S), hours(target_tokens, FAIRSEQ_TOKENS_PER_S)
        cost = SEEDS * sum(COST[system] for system in corpus.systems)
        rows.append(f"| {corpus.name} ({corpus.pairs}) | {corpus.papers} | {corpus.updates:,} updates x "
                    f"{corpus.tokens_per_update:,} tokens ({corpus.recipe}) | {base[0]:.1f} / {base[1]:.1f} "
                    f"| {len(corpus.systems)} x {SEEDS} | {base[0] * cost:,.0f} / {base[1] * cost:,.0f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu_hours.md"))
    args = parser.parse_args()
    text = (f"## H100-hours of the papers' claims at their own scale\n\ncommand: `python {' '.join(sys.argv)}`\n\n"
            f"{table()}\n\nThroughput: ordo {ORDO_TOKENS_PER_S:,} and fairseq {FAIRSEQ_TOKENS_PER_S:,} target tokens/s "
            f"(base preset, 25,000 tokens per batch, one H100); {TARGET_SHARE:.0%} of a budget's tokens are real target "
            f"tokens; methods at their CPU-measured cost over the baseline. One H100 takes each update as one batch "
            f"(`--set train.max_tokens=24576 --set train.update_freq=1` for the 4,096 x 6 recipes), the shape of the "
            f"throughput figure; the recipes' 4,096-token batches run slower per token.\n")
    print(text)
    with atomic_write(args.out) as handle:
        handle.write(text)


if __name__ == "__main__":
    main()
