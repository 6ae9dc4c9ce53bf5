"""What the papers' claims cost at the papers' own scale and at the cheaper budget: H100-hours per run and per
verdict, ordo and fairseq, under each budget of recipes/budgets.py.

A run is a budget of updates x tokens per update (the token budget counting the longer side of each padded pair):
each budget of a paper-scale recipe's budgets.yaml (``paper``, the papers' own schedule, and ``short``), which its
verdict suite trains to as well (suite.yaml's ``budgets``); a recipe without budgets (IWSLT14) has its train.yaml's
``max_steps`` of ``max_tokens`` x ``update_freq``. ``TARGET_SHARE`` of that budget is real target tokens
(0.84-0.88 measured on Multi30k's batches at 4,096 and 25,000 tokens). Time is those target tokens at the
throughput measured on one H100 for the base preset at 25,000 tokens per batch, ordo against fairseq 0.12
``--fp16`` in the same call (bench/RESULTS.md, "Against fairseq on the H100"; rerun with bench/gpu/check.sh),
times each system's measured cost over the baseline (``COST``: bench/RESULTS.md, "Method cost", CPU figures; the
GPU's may differ). A verdict is every run the claims of recipes/verdicts.yaml on the suite's corpus want
(recipes.replicate.seeds_wanted: each claim's ``seeds`` of its system, and as many, two at least, of its
comparison system, shared between claims), all at one budget. Not counted: data preparation, validation,
translation and scoring (minutes, not hours), and the systems with no GPU figure (``UNPRICED``: RNNsearch* and
its distortion models).

usage: python bench/gpu_hours.py [--out bench/results/gpu_hours.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # run as `python bench/NAME.py`: the repository root, not bench/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from ordo.data.textio import atomic_write, read_yaml
from recipes.budgets import Budget, folder_budgets
from recipes.compare import RECIPES
from recipes.replicate import seeds_wanted
from recipes.verdicts import read_claims

ORDO_TOKENS_PER_S = 311_000  # median of 294-328k target tokens/s, base preset, 25,000 tokens, 8k pieces, one H100
FAIRSEQ_TOKENS_PER_S = 143_000  # fairseq 0.12 --fp16, same call, same pieces and batch size
TARGET_SHARE = 0.86
# training time of each system over the baseline's (bench/RESULTS.md, "Method cost": 1 / its speed ratio); the
# 1-best system of a lattice comparison at the baseline's, the lattice at its measured cost over that 1-best system
COST = {"baseline": 1.0, "both_res": 1 / 0.91, "exgre_soft": 1 / 0.97, "refsr_soft": 1 / 0.74,
        "future_cost_1": 1 / 0.80, "future_cost_2": 1 / 0.80, "onebest_jieba": 1.0, "onebest_bpe8k": 1.0,
        "onebest_bpe16k": 1.0, "onebest_bpe32k": 1.0, "lattice_lpe_lsa": 1 / 0.67,
        "lattice_lpe": 1 / 0.67, "lattice_lsa": 1 / 0.67}  # LPE or LSA alone: LPE+LSA's measured cost assumed
# (the lattice's cost is NIST's word lattice's, Zh chars+jieba+thulac; IWSLT16's subword lattices measured 0.82-0.92
# of their 1-best system on Multi30k on the CPU: priced at the word lattice's, an upper bound)
UNPRICED = {"rnnsearch", "rnn_h_distortion", "rnn_s_distortion", "rnn_t_distortion"}  # RNNsearch*: no GPU figure
# the papers' corpora: recipe (one baseline run) or verdict suite -> the corpus's name and size, as the table shows it
RECIPE_CORPORA = {"wmt14_ende": "WMT14 En-De (4.5M)", "wmt17_zhen": "WMT17 Zh-En (16.1M public of the papers' 22M)",
                  "aspec_jaen": "ASPEC Ja-En (2M, licensed)", "kftt_jaen": "KFTT Ja-En (440k)",
                  "nist_zhen": "NIST Zh-En (1.25M, licensed)", "iwslt16_ende": "IWSLT16 En-De (191k)",
                  "iwslt14_deen": "IWSLT14 De-En (160k)"}
SUITES = ["wmt14_verdict", "wmt17_verdict", "aspec_verdict", "kftt_verdict", "nist_verdict", "iwslt16_verdict"]


def hours(budget: Budget, tokens_per_s: float) -> float:
    """Hours of one baseline run of ``budget`` at ``tokens_per_s`` real target tokens per second."""
    return budget.steps * budget.tokens_per_update * TARGET_SHARE / tokens_per_s / 3600


def run_hours(budget: Budget, cost: float = 1.0) -> tuple[float, float]:
    """(ordo, fairseq) H100-hours of ``cost`` baseline runs of ``budget``."""
    return hours(budget, ORDO_TOKENS_PER_S) * cost, hours(budget, FAIRSEQ_TOKENS_PER_S) * cost


def hours_cell(figures: tuple[float, float], digits: int) -> str:
    """``ORDO / FAIRSEQ`` hours with ``digits`` decimals."""
    return " / ".join(f"{value:,.{digits}f}" for value in figures)


def budget_cell(budget: Budget) -> str:
    """A budget's name and its run in a table cell: ``paper: 300,000 updates x 32,768 tokens, warm-up 8,000``."""
    return f"{budget.name or 'its train.yaml'}: {budget}, warm-up {budget.warmup_steps:,}"


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
    """The markdown table of one baseline run of each paper-scale recipe under each of its budgets."""
    rows = ["| corpus (pairs) | budget: run (recipe) | one baseline run, ordo / fairseq H100-h |", "|---|---|---:|"]
    for recipe, corpus in RECIPE_CORPORA.items():
        rows += [f"| {corpus} | {budget_cell(run)} (recipes/{recipe}) | {hours_cell(run_hours(run), 1)} |"
                 for run in folder_budgets(RECIPES / recipe)]
    return "\n".join(rows)


def verdict_cost(runs: dict[str, int]) -> float:
    """The priced runs of a verdict (system -> seeds) in baseline runs, each system at its ``COST``."""
    return sum(seeds * COST[system] for system, seeds in runs.items() if system not in UNPRICED)


def verdict_row(suite: str, claims: list[dict], run: Budget) -> str:
    """One suite's row of the verdicts table (:func:`verdict_table`) at the budget ``run``."""
    spec = read_yaml(RECIPES / suite / "suite.yaml")
    runs = verdict_runs(suite, claims)
    priced = {system: seeds for system, seeds in runs.items() if system not in UNPRICED}
    left = ", ".join(f"{system} {seeds}" for system, seeds in runs.items() if system in UNPRICED)
    systems = ", ".join(f"{system} {seeds}" for system, seeds in priced.items())
    return (f"| `{suite}`: {RECIPE_CORPORA[spec['corpus']]} | {papers(suite, claims)} | {budget_cell(run)} "
            f"| {systems} ({sum(priced.values())} runs){f'; not counted: {left}' if left else ''} "
            f"| {hours_cell(run_hours(run, verdict_cost(runs)), 0)} |")


def verdict_table(claims: list[dict]) -> str:
    """The markdown table of each paper-scale verdict suite under each budget: its runs and their H100-hours."""
    header = ("| suite: corpus (pairs) | papers | budget: each run | systems: seeds (runs) "
              "| whole verdict, ordo / fairseq H100-h |")
    rows = [verdict_row(suite, claims, run) for suite in SUITES for run in folder_budgets(RECIPES / suite)]
    return "\n".join([header, "|---|---|---|---|---:|", *rows])


def budget_totals(claims: list[dict]) -> dict[str, tuple[float, float]]:
    """Budget name -> (ordo, fairseq) H100-hours of every verdict of :data:`SUITES` at that budget."""
    totals: dict[str, tuple[float, float]] = {}
    for suite in SUITES:
        cost = verdict_cost(verdict_runs(suite, claims))
        for run in folder_budgets(RECIPES / suite):
            ordo, fairseq = run_hours(run, cost)
            before = totals.get(str(run.name), (0.0, 0.0))
            totals[str(run.name)] = (before[0] + ordo, before[1] + fairseq)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/gpu_hours.md"))
    args = parser.parse_args()
    claims = read_claims()
    totals = "; ".join(f"`{name}` {ordo:,.0f} / {fairseq:,.0f}" for name, (ordo, fairseq) in
                       budget_totals(claims).items())
    text = (f"## H100-hours of the papers' claims at their own scale and at the cheaper budget\n\ncommand: `python "
            f"{' '.join(sys.argv)}`\n\nEach paper-scale recipe and verdict suite trains to a named budget "
            f"(recipes/budgets.py; `--budget NAME`): `paper`, the schedule the papers trained their claims with "
            f"(the default; on KFTT, which stands in for ASPEC, paper 000's ASPEC schedule with its updates scaled to as "
            f"many passes over the corpus; on IWSLT16, paper 002's batch with Vaswani et al. 2017's updates and "
            f"warm-up, which it follows), or `short`, the cheaper one (a quarter of the paper's tokens on WMT14, "
            f"WMT17, ASPEC and IWSLT16, half on NIST, 0.23 on KFTT). One baseline run of each recipe:\n\n"
            f"{run_table()}\n\nEach verdict, every run its claims want (recipes/verdicts.yaml's seeds), each system "
            f"at its measured cost:\n\n{verdict_table(claims)}\n\nAll {len(SUITES)} verdicts, ordo / fairseq "
            f"H100-hours: {totals}.\n\n"
            f"Throughput: ordo {ORDO_TOKENS_PER_S:,} and fairseq {FAIRSEQ_TOKENS_PER_S:,} target tokens/s "
            f"(base preset, 25,000 tokens per batch, one H100); {TARGET_SHARE:.0%} of a budget's tokens are real "
            f"target tokens; methods at their CPU-measured cost over the baseline (the lattice at 1/0.67 of its "
            f"1-best system, which is priced as the baseline: NIST's word lattice, an upper bound for IWSLT16's "
            f"subword lattices, measured at 0.82-0.92). One H100 takes each update as one batch (`--set "
            f"train.max_tokens=32768 --set train.update_freq=1` for the paper budget's 4,096 x 8, 24576 for the "
            f"short budget's 4,096 x 6, 16384 for IWSLT16's 1,024 x 16), the shape of the throughput figure; "
            f"4,096-token batches run slower per token.\n")
    print(text)
    with atomic_write(args.out) as handle:
        handle.write(text)


if __name__ == "__main__":
    main()
