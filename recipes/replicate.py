"""The verdict runs (issue 25): each system of a suite under several seeds, at the suite's fixed update budget,
with the small files anyone can rescore from committed under bench/hyps/CORPUS/.

``run`` trains (or resumes) each ``SYSTEM.seedN`` of a suite (recipes/SUITE/systems.yaml's overrides plus
``train.seed=N``) to suite.yaml's ``steps`` updates, averages its last ``average_last`` checkpoints, translates
the test set with beam search, and writes ``bench/hyps/CORPUS/SYSTEM.seedN.txt`` (one line per source line)
and ``SYSTEM.seedN.yaml`` (overrides, updates, training minutes, parameters, checkpoints averaged, commit,
dev loss curve). ``--oracle`` trains the suite's systems on the corpus whose every source sentence is put in
target order by the prepared data's word alignments (paper 000's Figure 2 upper bound), as ``oracle_SYSTEM``.

``tables`` rebuilds the verdicts from those files alone (recipes/verdicts.yaml lists the claims): BLEU of every
seed, the paired difference per seed, the baseline's seed standard deviation, the paired bootstrap p over the
pooled seeds, and the verdict by the rule stated in bench/RESULTS.md (:func:`verdict`).

usage: python recipes/replicate.py run --suite enja_verdict [--work DIR] [--oracle] SYSTEM.seedN [...]
       python recipes/replicate.py tables [--out bench/results/verdicts.md]
"""

from __future__ import annotations

import argparse
import gzip
import re
import statistics
import subprocess
import sys
from pathlib import Path

import yaml
from compare import RECIPES, ROOT, data_folder, prepare, system_entry, train

from ordo import api
from ordo.analysis.systems import training_figures
from ordo.analysis.tables import markdown_table
from ordo.build import count_parameters
from ordo.cli import main as ordo
from ordo.data.textio import atomic_write, read_lines, read_yaml
from ordo.evaluation.bleu import corpus_scores, multi_bleu
from ordo.evaluation.significance import two_sided_bootstrap_p
from ordo.training.checkpoint import load_checkpoint

HYPS = ROOT / "bench" / "hyps"
VALID_LINE = re.compile(r"valid \| update (\d+) \| loss ([0-9.]+)")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    run = verbs.add_parser("run", help="train, translate and record systems")
    run.add_argument("systems", nargs="+", metavar="SYSTEM.seedN", help="names from the suite's systems.yaml")
    run.add_argument("--suite", required=True, help="folder of recipes/ with suite.yaml and the configs")
    run.add_argument("--data-dir", type=Path, help="corpus folder (default: the suite's, in ../shared/data)")
    run.add_argument("--work", type=Path, help="default: work/SUITE")
    run.add_argument("--oracle", action="store_true", help="train on the target-order source corpus")
    run.add_argument("--threads", type=int, help="CPU threads per run (default: the suite's train.yaml)")
    tables = verbs.add_parser("tables", help="rebuild the verdicts table from bench/hyps/")
    tables.add_argument("--hyps", type=Path, default=HYPS, help="folder of CORPUS/SYSTEM.seedN.txt (default: %(default)s)")
    tables.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data", help="corpus folders")
    tables.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "verdicts.md")
    return parser.parse_args()


def split_seed(name: str) -> tuple[str, int]:
    """``SYSTEM.seedN`` as (SYSTEM, N)."""
    match = re.fullmatch(r"(.+)\.seed(\d+)", name)
    if not match:
        sys.exit(f"{name}: expected SYSTEM.seedN, e.g. baseline.seed1")
    return match.group(1), int(match.group(2))


def commit_id() -> str:
    """The checkout's commit, with ``+changes`` when tracked files differ from it."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "ordo", "recipes"], cwd=ROOT,
                           check=False).returncode != 0
    return head + ("+changes" if dirty else "")


def dev_loss_curve(run_dir: Path) -> dict[int, float]:
    """Dev loss by update from the run's train.log (the last value logged for an update wins, e.g. on resume)."""
    text = (run_dir / "train.log").read_text(encoding="utf-8")
    return {int(step): float(loss) for step, loss in VALID_LINE.findall(text)}


def oracle_corpus(aligned_data: Path, spec: dict, out: Path) -> Path:
    """Every split of a prepared, aligned corpus with each source put in target order (``ordo reorder``),
    written as the suite's corpus files under ``out``; reused when present."""
    names = {"train": spec["splits"]["train"], "valid": spec["splits"]["valid"], "test": spec["splits"]["test"]}
    out.mkdir(parents=True, exist_ok=True)
    for split, name in names.items():
        target = out / f"{name}.{spec['src']}.gz"
        if target.exists():
            continue
        reordered = out / f"{split}.reordered.txt"
        if ordo(["reorder", "--src", str(aligned_data / f"{split}.src.txt"),
                 "--align", str(aligned_data / f"{split}.align"), "--out", str(reordered)]) != 0:
            sys.exit("reorder failed")
        with gzip.open(out / f"{name}.{spec['tgt']}.gz", "wt", encoding="utf-8") as handle:
            handle.write((aligned_data / f"{split}.tgt.txt").read_text(encoding="utf-8"))
        with gzip.open(target, "wt", encoding="utf-8") as handle:
            handle.write(reordered.read_text(encoding="utf-8"))
        reordered.unlink()
    return out


def record_paths(folder: Path, label: str) -> tuple[Path, Path]:
    """The hypotheses and settings files of ``label`` (``SYSTEM.seedN``) in ``folder``."""
    return folder / f"{label}.txt", folder / f"{label}.yaml"


def keep_test_links(data: Path, folder: Path) -> None:
    """The prepared test split's word links copied once to ``folder/test.align`` (main's replicate.py)."""
    links = data / "test.align"
    if links.exists() and not (folder / "test.align").exists():
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_write(folder / "test.align") as handle:
            handle.write(links.read_text(encoding="utf-8"))


def record(run_dir: Path, name: str, seed: int, overrides: list[str], sources: list[str], hyps_path: Path,
           settings_path: Path) -> None:
    """Translate ``sources`` with the averaged checkpoint; write the hypotheses and the settings atomically."""
    run = api.load_run(run_dir, "averaged")
    hyps = run.translate(sources)
    figures = training_figures(run_dir)
    settings = {
        "system": name, "seed": seed, "overrides": overrides, "updates": figures.updates,
        "train_minutes": round(figures.minutes, 1), "parameters": count_parameters(run.model),
        "averaged": load_checkpoint(run_dir / "checkpoints" / "averaged.pt")["averaged"], "commit": commit_id(),
        "threads": read_yaml(run_dir / "config.yaml")["train"]["threads"],
        "dev_loss": dev_loss_curve(run_dir),
    }
    hyps_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(hyps_path) as handle:
        handle.write("".join(f"{hyp}\n" for hyp in hyps))
    with atomic_write(settings_path) as handle:
        yaml.safe_dump(settings, handle, sort_keys=False)
    print(f"== {name} seed {seed}: {hyps_path}", flush=True)


def run_systems(args: argparse.Namespace) -> None:
    """Train and record each ``SYSTEM.seedN`` named on the command line, in order."""
    suite = RECIPES / args.suite
    spec = read_yaml(suite / "suite.yaml")
    systems = read_yaml(suite / "systems.yaml")
    data_dir = args.data_dir or ROOT.parent / "shared" / "data" / spec["corpus"]
    work = args.work or ROOT / "work" / args.suite
    corpus = spec["corpus"]
    if args.oracle:  # recorded as oracle_SYSTEM.seedN beside the corpus's other systems
        prepare(suite / "prepare.yaml", spec, data_dir, data_folder(work, "prepare.yaml"))
        data_dir = oracle_corpus(data_folder(work, "prepare.yaml"), spec, work / "oracle_corpus")
        work = work / "oracle"
    sources = read_lines(data_dir / f"{spec['splits']['test']}.{spec['src']}.gz")
    for label in args.systems:
        name, seed = split_seed(label)
        if name not in systems:
            sys.exit(f"unknown system {name}; {suite / 'systems.yaml'} has {sorted(systems)}")
        prepare_file, overrides = system_entry(name, systems[name])
        overrides = [*overrides, f"train.seed={seed}"]
        data = data_folder(work, prepare_file)
        prepare(suite / prepare_file, spec, data_dir, data)
        if not args.oracle:
            keep_test_links(data, HYPS / corpus)
        run_dir = work / "runs" / label
        train(suite, label, overrides, data, run_dir, int(spec["steps"]), args.threads, [], int(spec["average_last"]))
        hyps_path, settings_path = record_paths(HYPS / corpus, f"oracle_{label}" if args.oracle else label)
        if not hyps_path.exists():
            record(run_dir, name, seed, overrides, sources, hyps_path, settings_path)


def verdict(gains: list[float], baseline_sd: float) -> str:
    """The verdict rule of bench/RESULTS.md: "confirmed" when the mean gain over seeds exceeds twice the
    baseline's seed standard deviation and every seed's gain has the same sign; "reversed" for the mirror
    case; otherwise "not confirmed at this scale"."""
    mean = statistics.fmean(gains)
    if abs(mean) > 2 * baseline_sd and (all(g > 0 for g in gains) or all(g < 0 for g in gains)):
        return "confirmed" if mean > 0 else "reversed"
    return "not confirmed at this scale"


def seeds_of(folder: Path, system: str) -> dict[int, list[str]]:
    """The committed test hypotheses of ``system`` by seed: ``folder/SYSTEM.seedN.txt``."""
    found = {}
    for path in folder.glob(f"{system}.seed*.txt"):
        _, seed = split_seed(path.name.removesuffix(".txt"))
        found[seed] = read_lines(path)
    return found


def mean_minutes(folder: Path, system: str) -> float | None:
    """Mean training minutes over the recorded seeds of ``system`` (their SYSTEM.seedN.yaml), None if none."""
    minutes = [float(read_yaml(path)["train_minutes"]) for path in folder.glob(f"{system}.seed*.yaml")]
    return statistics.fmean(minutes) if minutes else None


def suite_of(corpus: str) -> dict:
    """The suite.yaml of the verdict suite (``recipes/*_verdict``) of ``corpus``."""
    for path in sorted(RECIPES.glob("*_verdict/suite.yaml")):
        spec = read_yaml(path)
        if spec["corpus"] == corpus:
            return spec
    sys.exit(f"no recipes/*_verdict/suite.yaml for corpus {corpus}")


def claim_row(claim: dict, hyps_root: Path, data_root: Path) -> list[str]:
    """One row of the verdicts table; systems without two seeds on both sides are reported as pending."""
    spec = suite_of(claim["corpus"])
    refs = read_lines(data_root / claim["corpus"] / f"{spec['splits']['test']}.{spec['tgt']}.gz")
    bleu = multi_bleu if spec.get("tokenized") else (lambda h, r: float(corpus_scores(h, r)["bleu"]))
    base = seeds_of(hyps_root / claim["corpus"], claim["baseline"])
    system = seeds_of(hyps_root / claim["corpus"], claim["system"])
    common = sorted(set(base) & set(system))
    scores = {name: {seed: bleu(hyps, refs) for seed, hyps in runs.items()}
              for name, runs in (("base", base), ("system", system))}
    listed = ", ".join(f"{scores['system'][s]:.2f}" for s in sorted(system)) or "-"
    minutes = [mean_minutes(hyps_root / claim["corpus"], claim[side]) for side in ("system", "baseline")]
    cells = [claim["paper"], claim["claim"], claim["corpus"], f"{claim['system']} vs {claim['baseline']}", listed,
             " / ".join("-" if m is None else f"{m:.0f}" for m in minutes)]
    if len(base) < 2 or len(common) < 2:
        return [*cells, "-", "-", "-", f"pending ({len(base)} baseline, {len(system)} system seeds)"]
    gains = [scores["system"][s] - scores["base"][s] for s in common]
    baseline_sd = statistics.stdev(scores["base"].values())
    pooled_refs = refs * len(common)
    p_value = two_sided_bootstrap_p([h for s in common for h in base[s]], [h for s in common for h in system[s]],
                                  pooled_refs)
    gain_cell = f"{statistics.fmean(gains):+.2f} ({', '.join(f'{g:+.2f}' for g in gains)})"
    return [*cells, gain_cell, f"{baseline_sd:.2f} ({len(base)} seeds)", f"{p_value:.3g}", verdict(gains, baseline_sd)]


def write_tables(args: argparse.Namespace) -> None:
    """The verdicts table of every claim in recipes/verdicts.yaml, printed and written to ``args.out``."""
    claims = yaml.safe_load((RECIPES / "verdicts.yaml").read_text(encoding="utf-8"))
    header = ["paper", "claim (paper's setting)", "corpus", "comparison", "BLEU by seed", "train min (system / base)",
              "gain: mean (per seed)", "baseline seed sd", "bootstrap p (pooled seeds)", "verdict"]
    rows = [claim_row(claim, args.hyps, args.data_root) for claim in claims]
    table = markdown_table(header, rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(args.out) as handle:
        handle.write(table)
    print(table, end="")


def main() -> None:
    args = parse_args()
    if args.verb == "run":
        run_systems(args)
    else:
        write_tables(args)


if __name__ == "__main__":
    main()
