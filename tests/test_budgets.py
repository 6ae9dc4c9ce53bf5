"""The named budgets of the paper-scale recipes and verdict suites (recipes/budgets.py, issue 43): a name picks
the papers' updates, tokens and warm-up into a run's config and settings, an unknown name or a malformed budgets
file is named, runs of two budgets are never compared, the recipes' run.sh takes --budget,
bench/gpu_hours.py prices every budget, and KFTT's paper budget is ASPEC's scaled to as many passes over it."""

import gzip
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ordo.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: the recipes package
from bench import gpu_hours
from recipes import budgets, compare, replicate, verdicts

PAPER_SUITES = {"wmt14_verdict": "wmt14_ende", "wmt17_verdict": "wmt17_zhen", "aspec_verdict": "aspec_jaen",
                "kftt_verdict": "kftt_jaen", "nist_verdict": "nist_zhen", "iwslt16_verdict": "iwslt16_ende"}
H100 = {"device": "NVIDIA H100 80GB HBM3", "precision": "bfloat16"}


def test_every_paper_scale_suite_trains_to_its_corpus_recipes_budgets_paper_by_default():
    for suite, recipe in PAPER_SUITES.items():
        assert budgets.budgets_file(verdicts.RECIPES / suite) == verdicts.RECIPES / recipe / "budgets.yaml", suite
        named = budgets.folder_budgets(verdicts.RECIPES / recipe)
        assert [budget.name for budget in named] == ["paper", "short"], recipe
        assert budgets.folder_budget(verdicts.RECIPES / suite) == named[0]  # the default: the papers' schedule
        assert named[0].steps * named[0].tokens_per_update > named[1].steps * named[1].tokens_per_update, recipe
    for suite in ("enja_verdict", "m30k_verdict", "enja_compare"):  # the CPU suites: one schedule, no name
        assert not budgets.has_budgets(verdicts.RECIPES / suite)
        only = budgets.folder_budget(verdicts.RECIPES / suite)
        assert only.name is None and only.steps == verdicts.read_yaml(verdicts.RECIPES / suite / "suite.yaml")["steps"]


def write_splits(folder: Path, spec: dict) -> None:
    """One made-up pair in each of the suite's split files (``spec`` its suite.yaml)."""
    folder.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        for name in verdicts.split_files(spec, split):
            with gzip.open(folder / name, "wt", encoding="utf-8") as handle:
                handle.write("a house\n")


@pytest.mark.parametrize("name, steps, tokens, update_freq, warmup", [
    (None, 300_000, 4096, 8, 8000),  # paper 000 §5.3, paper 004 §5.2: 300,000 batches of 4096x8, warm-up 8,000
    ("short", 100_000, 4096, 6, 4000),
])
def test_the_budget_name_selects_its_updates_tokens_and_warm_up_into_the_runs_config(
        name, steps, tokens, update_freq, warmup, tmp_path, monkeypatch):
    spec = verdicts.read_yaml(verdicts.RECIPES / "wmt14_verdict" / "suite.yaml")
    write_splits(tmp_path / "corpus", spec)
    monkeypatch.setenv("ORDO_COMMIT", "0123456789abcdef")
    monkeypatch.setattr(replicate, "training_device", lambda config: H100)
    monkeypatch.setattr(replicate, "prepare", lambda *args: None)
    monkeypatch.setattr(replicate, "keep_test_links", lambda *args: None)
    trained, averaged, recorded = [], [], []
    monkeypatch.setattr(compare.api, "train", lambda cfg, run_dir: trained.append(cfg))
    monkeypatch.setattr(compare.api, "average", lambda run_dir, last: averaged.append(last))
    monkeypatch.setattr(replicate, "record", lambda run_dir, settings, *args: recorded.append((run_dir, settings)))
    runs = replicate.SuiteRuns("wmt14_verdict", data_dir=tmp_path / "corpus", work=tmp_path / "work",
                               hyps=tmp_path / "hyps", budget=name)
    assert replicate.run_system(runs, "both_res.seed2")
    (cfg,) = trained
    assert (cfg.train.max_steps, cfg.train.max_tokens, cfg.train.update_freq, cfg.train.warmup_steps) == (
        steps, tokens, update_freq, warmup)
    assert cfg.train.seed == 2 and cfg.model.methods["reorder_emb"].variant == "both"  # the system's own overrides
    assert averaged == [5]
    run_dir, settings = recorded[0]
    assert settings["budget"] == {"name": name or "paper", "steps": steps, "max_tokens": tokens,
                                  "update_freq": update_freq, "warmup_steps": warmup, "average_last": 5}
    assert run_dir.parts[-3] == f"gpu-nvidia-h100-80gb-hbm3-bf16-{name or 'paper'}"  # the set: one per budget


def train_pairs(recipe: str) -> int:
    """The training pairs of a recipe's corpus: the line counts its release.yaml checks for train.{lang}.gz."""
    release = verdicts.read_yaml(verdicts.RECIPES / recipe / "release.yaml")
    return sum(piece["lines"] for piece in release["outputs"]["train.{lang}.gz"])


def test_kftts_paper_budget_is_aspecs_scaled_to_as_many_passes_over_the_corpus():
    """KFTT stands in for ASPEC: paper 000's ASPEC batch, warm-up and averaging, its updates scaled by the two
    training sets' pairs (no token counts at hand) and rounded to a multiple of the checkpoint interval."""
    aspec = budgets.folder_budget(verdicts.RECIPES / "aspec_jaen", "paper")
    kftt = budgets.folder_budget(verdicts.RECIPES / "kftt_jaen", "paper")
    assert (kftt.max_tokens, kftt.update_freq, kftt.warmup_steps, kftt.average_last) == (
        aspec.max_tokens, aspec.update_freq, aspec.warmup_steps, aspec.average_last)
    assert train_pairs("aspec_jaen") == 2_000_000  # paper 000 §5.1's "2M": train-1 and train-2
    scaled = aspec.steps * train_pairs("kftt_jaen") / train_pairs("aspec_jaen")
    interval = verdicts.read_yaml(verdicts.RECIPES / "kftt_jaen" / "train.yaml")["train"]["valid_every"]
    assert kftt.steps == round(scaled / interval) * interval
    passes = [budget.steps * budget.tokens_per_update / train_pairs(recipe)
              for budget, recipe in ((kftt, "kftt_jaen"), (aspec, "aspec_jaen"))]
    assert passes[0] == pytest.approx(passes[1], rel=interval / 2 / kftt.steps)
    text = (verdicts.RECIPES / "kftt_jaen" / "budgets.yaml").read_text(encoding="utf-8")
    assert f"= {scaled:,.1f} updates" in text and f"{kftt.steps:,} updates" in text  # the comment's arithmetic


def test_an_unknown_budget_is_named_with_its_file(tmp_path, monkeypatch):
    monkeypatch.setenv("ORDO_COMMIT", "0123abc")
    monkeypatch.setattr(replicate, "training_device", lambda config: H100)
    with pytest.raises(ConfigError, match=r"recipes/wmt14_ende/budgets.yaml: no budget 'papr' \(did you mean "
                                                  r"paper\?\); its budgets: paper, short"):
        replicate.plan_run(replicate.SuiteRuns("wmt14_verdict", budget="papr"), "baseline.seed1")
    monkeypatch.setattr(sys, "argv", ["replicate.py", "pending", "--budget", "quarter"])
    with pytest.raises(SystemExit, match=r"error: .*recipes/wmt14_ende/budgets.yaml: no budget 'quarter'; its "
                                         r"budgets: paper, short"):
        replicate.main()
    with pytest.raises(ConfigError, match=r"recipes/enja_verdict: no budgets.yaml .*not 'short'"):
        replicate.plan_run(replicate.SuiteRuns("enja_verdict", budget="short"), "baseline.seed1")
    path = tmp_path / "budgets.yaml"
    for fields, message in (({"steps": 10, "max_tokens": 4, "update_freq": 1, "warmup": 2, "average_last": 1},
                             r"paper: unknown key warmup \(did you mean warmup_steps\?\); missing warmup_steps"),
                            ({"steps": 0, "max_tokens": 4, "update_freq": 1, "warmup_steps": 2, "average_last": 1.5},
                             r"paper: steps, average_last: expected a positive integer")):
        path.write_text(yaml.safe_dump({"paper": fields}), encoding="utf-8")
        with pytest.raises(ConfigError, match=f"{re.escape(str(path))}: {message}"):
            budgets.read_budgets(path)


def test_runs_of_two_budgets_never_share_a_set_and_are_refused_in_one_comparison(tmp_path, monkeypatch):
    monkeypatch.setattr(replicate, "training_device", lambda config: H100)
    sets = {name: replicate.machine_set("wmt14_verdict", None, name) for name in (None, "paper", "short")}
    assert sets[None] == sets["paper"] == "gpu-nvidia-h100-80gb-hbm3-bf16-paper" != sets["short"]
    assert replicate.machine_set("m30k_verdict", None, replicate.queue_budget("m30k_verdict", "short")) == (
        "gpu-nvidia-h100-80gb-hbm3-bf16")  # a suite without budgets keeps its one set
    folder = tmp_path / "hyps" / "wmt14_ende" / "gpu-nvidia-h100-80gb-hbm3-bf16"  # e.g. files copied together
    runs = {"baseline": "paper", "both_res": "short"}
    for system, name in runs.items():
        budget = budgets.folder_budget(verdicts.RECIPES / "wmt14_verdict", name)
        for seed in (1, 2):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{system}.seed{seed}.txt").write_text("ein Haus\n", encoding="utf-8")
            (folder / f"{system}.seed{seed}.yaml").write_text(yaml.safe_dump(
                {"commit": "0123456", "device": H100["device"], "precision": "bfloat16", "budget": budget.settings}))
    claim = {"corpus": "wmt14_ende", "baseline": "baseline", "system": "both_res"}
    comparison = verdicts.Comparison(claim, ["ein Haus"], False, {}, {}, {}, {}, folder)
    assert comparison.refusal == "refused: runs differ in budget (paper, short)"


def recipe_budget(recipe: str, *budget: str) -> subprocess.CompletedProcess:
    """recipes/lib.sh's recipe_budget for ``recipe`` (``budget``: the --budget NAME given), printing what it sets."""
    lib = shlex.quote(str(verdicts.RECIPES / "lib.sh"))
    script = (f"here={shlex.quote(str(verdicts.RECIPES / recipe))}; source {lib}; py={shlex.quote(sys.executable)}; "
              f"work=W budget={shlex.quote(''.join(budget))}; recipe_budget; "
              'echo "$out $average_last ${budget_sets[*]+${budget_sets[*]}}"')
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)


def test_a_recipe_runs_at_the_budget_its_run_sh_names():
    assert recipe_budget("kftt_jaen", "short").stdout.split() == [
        "W/short", "5", "--set", "train.max_steps=60000", "--set", "train.max_tokens=4096", "--set",
        "train.update_freq=2", "--set", "train.warmup_steps=4000"]
    assert recipe_budget("nist_zhen").stdout.split()[:4] == ["W/paper", "5", "--set", "train.max_steps=200000"]
    assert recipe_budget("iwslt16_ende").stdout.split() == [  # paper 002's 1,024 x 16 tokens, Vaswani's 100k, 4k
        "W/paper", "5", "--set", "train.max_steps=100000", "--set", "train.max_tokens=1024", "--set",
        "train.update_freq=16", "--set", "train.warmup_steps=4000"]
    assert recipe_budget("iwslt14_deen").stdout.split() == ["W", "4"]  # no budgets: its train.yaml, in WORK
    unknown = recipe_budget("wmt14_ende", "quarter")
    assert unknown.returncode == 2 and "wmt14_ende/budgets.yaml: no budget 'quarter'" in unknown.stderr


def test_the_gpu_hours_price_each_suite_under_both_budgets():
    claims = verdicts.read_claims()
    for suite in gpu_hours.SUITES:
        paper, short = budgets.folder_budgets(verdicts.RECIPES / suite)
        rows = [gpu_hours.verdict_row(suite, claims, run) for run in (paper, short)]
        assert rows[0].count(f"paper: {paper}") == 1 and rows[1].count(f"short: {short}") == 1
        hours = [float(row.rstrip(" |").split(" | ")[-1].split(" / ")[0].replace(",", "")) for row in rows]
        ratio = paper.steps * paper.tokens_per_update / (short.steps * short.tokens_per_update)
        assert hours[0] / hours[1] == pytest.approx(ratio, rel=0.05), suite  # whole hours, rounded
    table = gpu_hours.verdict_table(claims)
    assert table.count("| paper: ") == table.count("| short: ") == len(gpu_hours.SUITES)
    totals = gpu_hours.budget_totals(claims)
    assert list(totals) == ["paper", "short"] and totals["paper"][0] > 2 * totals["short"][0]
    assert all(fairseq > ordo for ordo, fairseq in totals.values())
