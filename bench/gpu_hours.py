"""What the papers' claims cost at the papers' own scale: H100-hours per run and per verdict, ordo and fairseq.

A run is a budget of updates x tokens per update (the token budget counting the longer side of each padded pair):
a recipe's ``max_steps`` (recipes/RECIPE/train.yaml), a verdict suite's ``steps`` (recipes/SUITE/suite.yaml), each
with its train.yaml's ``max_tokens`` x ``update_freq``. ``TARGET_SHARE`` of that budget is real target tokens
(0.84-0.88 measured on Multi30k's batches at 4,096 and 25,000 tokens). Time is those target tokens at the
throughput measured on one H100 for the base preset at 25,000 tokens per batch, ordo against fairseq 0.12
``--fp16`` in the same call (bench/RESULTS.md, "Against fairseq on the H100"; rerun with bench/gpu/check.sh),
times each system's measured cost over the baseline (``COST``: bench/RESULTS.md, "Method cost", CPU figures; the
GPU's may differ). A verdict is every run the claims of recipes/verdicts.yaml on the suite's corpus want
(recipes.replicate.seeds_wanted: each claim's ``seeds`` of its system, and as many, two at least, of its
comparison system, shared between claims). Not counted: data preparation, validation, translation and scoring
(minutes, not hours), and the systems with no GPU figure (``UNPRICED``: RNNsearch* and its distortion models).

usage: python bench/gpu_hours.py [--out bench/results/gpu_hours.md]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as `python bench/NAME.py`: the repository root, not bench/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from ordo.data.textio import atomic_write, read_yaml
from recipes.compare import RECIPES
from recipes.replicate import seeds_wanted
from recipes.verdicts import read_claims

ORDO_TOKENS_PER_S = 311_000  # median of 294-328k target tokens/s, base preset, 25,000 tokens, 8k pieces, one H100
FAIRSEQ_TOKENS_PER_S = 143_000  # fairseq 0.12 --fp16, same call, same pieces and batch size
TARGET_SHARE = 0.86
# training time of each system over the baseline's (bench/RESULTS.md, "Method cost": 1 / its speed ratio); the
# 1-best system of a lattice comparison at the baseline's, the lattice at its measured cost over that 1-best system
COST = {"baseline": 1.0, "both_res": 1 / 0.91, "exgre_soft": 1 / 0.97, "refsr_soft": 1 / 0.74,
        "future_cost_1": 1 / 0.80, "future_cost_2": 1 / 0.80, "onebest_jieba": 1.0, "lattice_lpe_lsa": 1 / 0.67,
        "lattice_lpe": 1 / 0.67, "lattice_lsa": 1 / 0.67}  # LPE or LSA alone: LPE+LSA's measured cost assumed
UNPRICED = {"rnnsearch", "rnn_h_distortion", "rnn_s_distortion", "rnn_t_distortion"}  # RNNsearch*: no GPU figure
# the papers' corpora: recipe (one baseline run) or verdict suite -> the corpus's name and size, as the table shows it
RECIPE_CORPORA = {"wmt14_ende": "WMT14 En-De (4.5M)", "wmt17_zhen": "WMT17 Zh-En (16.1M public of the papers' 22M)",
                  "aspec_jaen": "ASPEC Ja-En (2M, licensed)", "kftt_jaen": "KFTT Ja-En (440k)",
                  "nist_zhen": "NIST Zh-En (1.25M, licensed)", "iwslt14_deen": "IWSLT14 De-En (160k)"}
SUITES = ["wmt14_verdict", "wmt17_verdict", "aspec_verdict", "kftt_verdict", "nist_verdict"]


@dataclass(frozen=True)
class Budget:
    """A run's budget: updates x tokens per update (the longer side of each padded pair)."""

    updates: int
    tokens_per_update: int

    def hours(self, tokens_per_s: float) -> float:
        """Hours of one baseline run at ``tokens_per_s`` real target tokens per second."""
        return self.updates * self.tokens_per_update * TARGET_SHARE / tokens_per_s / 3600

    def __str__(self) -> str:
        return f"{self.updates:,} updates x {self.tokens_per_update:,} tokens"


def budget(folder: Path, updates: int | None = None) -> Budget:
    """The run budget of a recipe or suite ``folder``: ``updates`` (default: its train.yaml's ``max_steps``) of its
    train.yaml's ``max_tokens`` x ``update_freq``."""
    train = read_yaml(folder / "train.yaml")["train"]
    return Budget(updates or int(train["max_steps"]), int(train["max_tokens"]) * int(train.get("update_freq", 1)))


def verdict_runs(suite: str, claims: list[dict]) -> dict[str, int]:
    """System -> the seeds the claims of recipes/verdicts.yaml on ``suite``'s corpus want of it (the claims marked
    ``first_pass`` want none), in the order the claims name them."""
    corpus = read_yaml(RECIPES / suite / "suite.yaml")["corpus"]
    return {system: seeds for (name, system), seeds in seeds_wanted(claims, {corpus: "-"}).items() if name == corpus}


def papers(suite: str, claims: list[dict]) -> str:
    """The papers whose claims ``suite`` tests, by number."""
    corpus = read_yaml(RECIPES / suite / "suite.yaml")["corpus"]
    return ", ".join(sorted({claim["paper"].split()[0] for claim in claims if claim["corpus"] == corpus}))


def run_table() -> str:
    """The markdown table of one baseline run of each paper-scale recipe."""
    rows = ["| corpus (pairs) | run (recipe) | one baseline run, ordo / fairseq H100-h |", "|---|---|---:|"]
    for recipe, corpus in RECIPE_CORPORA.items():
        run = budget(RECIPES / recipe)
        rows.append(f"| {corpus} | {run} (recipes/{recipe}) | {run.hours(ORDO_TOKENS_PER_S):.1f} / "
                    f"{run.hours(FAIRSEQ_TOKENS_PER_S):.1f} |")
    return "\n".join(rows)


def verdict_row(suite: str, claims: list[dict]) -> str:
    """One suite's row of the verdicts table (:func:`verdict_table`)."""
    spec = read_yaml(RECIPES / suite / "suite.yaml")
    run, runs = budget(RECIPES / suite, int(spec["steps"])), verdict_runs(suite, claims)
    priced = {system: seeds for system, seeds in runs.items() if system not in UNPRICED}
    cost = sum(seeds * COST[system] for system, seeds in priced.items())
    left = ", ".join(f"{system} {seeds}" for system, seeds in runs.items() if system in UNPRICED)
    systems = ", ".join(f"{system} {seeds}" for system, seeds in priced.items())
    hours = [run.hours(ORDO_TOKENS_PER_S) * cost, run.hours(FAIRSEQ_TOKENS_PER_S) * cost]
    return (f"| `{suite}`: {RECIPE_CORPORA[spec['corpus']]} | {papers(suite, claims)} | {run} | {systems} "
            f"({sum(priced.values())} runs){f'; not counted: {left}' if left else ''} "
            f"| {hours[0]:,.0f} / {hours[1]:,.0f} |")


def verdict_table(claims: list[dict]) -> str:
    """The markdown table of each paper-scale verdict suite: its runs and their H100-hours."""
    header = "| suite: corpus (pairs) | papers | each run | systems: seeds (runs) | whole verdict, ordo / fairseq H100-h |"
    return "\n".join([header, "|---|---|---|---|---:|", *(verdict_row(suite, claims) for suite in SUITES)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu_hours.md"))
    args = parser.parse_args()
    text = (f"## H100-hours of the papers' claims at their own scale\n\ncommand: `python {' '.join(sys.argv)}`\n\n"
            f"One baseline run of each recipe:\n\n{run_table()}\n\nEach verdict, every run its claims want "
            f"(recipes/verdicts.yaml's seeds), each system at its measured cost:\n\n{verdict_table(read_claims())}\n\n"
            f"Throughput: ordo {ORDO_TOKENS_PER_S:,} and fairseq {FAIRSEQ_TOKENS_PER_S:,} target tokens/s "
            f"(base preset, 25,000 tokens per batch, one H100); {TARGET_SHARE:.0%} of a budget's tokens are real target "
            f"tokens; methods at their CPU-measured cost over the baseline (the lattice at 1/0.67 of its 1-best "
            f"system, which is priced as the baseline). One H100 takes each update as one batch "
            f"(`--set train.max_tokens=24576 --set train.update_freq=1` for the 4,096 x 6 recipes), the shape of the "
            f"throughput figure; the recipes' 4,096-token batches run slower per token.\n")
    print(text)
    with atomic_write(args.out) as handle:
        handle.write(text)


if __name__ == "__main__":
    main()
