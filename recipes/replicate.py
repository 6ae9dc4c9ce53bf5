"""The verdict runs (issue 25): each system of a suite under several seeds, at the suite's fixed update budget,
with the small files anyone can rescore from committed under bench/hyps/CORPUS/.

``run`` trains (or resumes) each ``SYSTEM.seedN`` of a suite (recipes/SUITE/systems.yaml's overrides plus
``train.seed=N``) to suite.yaml's ``steps`` updates, averages its last ``average_last`` checkpoints, translates
the test set with beam search, and writes ``bench/hyps/CORPUS/SYSTEM.seedN.txt`` (one line per source line)
and ``SYSTEM.seedN.yaml`` (overrides, updates, training minutes, parameters, checkpoints averaged, commit,
dev loss curve). ``--oracle`` trains the suite's systems on the corpus whose every source sentence is put in
target order by the prepared data's word alignments (paper 000's Figure 2 upper bound), as ``oracle_SYSTEM``.

``tables`` rebuilds the verdicts tables and figures from those files alone (recipes/verdicts.py).

``pending`` lists the runs the verdicts still need, in the order they are worth running (:func:`pending_runs`):
the baseline's three seeds, then one seed of every system, then the second seeds, a corpus at a time, and last
a third seed of both systems of a claim whose first two seeds disagree on the sign of the gain. ``queue`` works
that list off, each time the next run no other process holds (``run`` takes the same lock), until every run is
recorded or held by another process: two workers of one thread each, started side by side, share the list.

usage: python recipes/replicate.py run --suite enja_verdict [--work DIR] [--oracle] SYSTEM.seedN [...]
       python recipes/replicate.py pending [--suite SUITE ...]
       python recipes/replicate.py queue [--suite SUITE ...] [--threads N]
       python recipes/replicate.py tables [--out bench/results/verdicts.md] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml
from compare import RECIPES, ROOT, data_folder, folder_lock, prepare, system_entry, train
from verdicts import Comparison, compare, read_claims, seeds_of, split_seed, suite_folder, write_tables

from ordo import api
from ordo.analysis.systems import training_figures
from ordo.build import count_parameters
from ordo.cli import main as ordo
from ordo.data.textio import atomic_write, read_lines, read_yaml
from ordo.precision import amp_dtype
from ordo.training.checkpoint import load_checkpoint
from ordo.training.distributed import resolve_device

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
    run.add_argument("--threads", type=int, help="CPU threads per run (default: the suite's train.yaml); two queues "
                     "of one thread each train about 20%% more updates per hour on 2 cores than one of two")
    for verb, text in (("pending", "list the runs the verdicts still need"),
                       ("queue", "run what the verdicts still need, beside other workers")):
        listing = verbs.add_parser(verb, help=text)
        listing.add_argument("--suite", action="append", dest="suites", metavar="SUITE",
                             help="only this suite's runs (repeatable; default: every verdict suite)")
        listing.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data", help="corpus folders")
        if verb == "queue":
            listing.add_argument("--threads", type=int, help="CPU threads of each run (as for run)")
    tables = verbs.add_parser("tables", help="rebuild the verdicts table from bench/hyps/")
    tables.add_argument("--hyps", type=Path, default=HYPS,
                        help="folder of CORPUS/SYSTEM.seedN.txt (default: %(default)s)")
    tables.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data", help="corpus folders")
    tables.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "verdicts.md")
    tables.add_argument("--results", type=lambda value: Path(value) if value else None,
                        default=ROOT / "bench" / "RESULTS.md",
                        help="document whose tables are replaced too (default: %(default)s; '' for none)")
    return parser.parse_args()


def commit_id() -> str:
    """The commit named by ``ORDO_COMMIT`` when set (a copy of the tree whose git metadata is not its own, as on a
    GPU machine, which receives the working tree with the session's first commit's .git), else the checkout's
    commit, with ``+changes`` when tracked files differ from it."""
    if "ORDO_COMMIT" in os.environ:
        return os.environ["ORDO_COMMIT"]
    head_run = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    if head_run.returncode != 0:
        sys.exit(f"{ROOT} is not a git checkout: name the commit it is a copy of in ORDO_COMMIT")
    head = head_run.stdout.strip()
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
    """The prepared test split's word links (``data/test.align``, when prepared with alignments) copied once to
    ``folder/test.align``, so that the tables can bucket the test pairs by reordering difficulty."""
    links = data / "test.align"
    if links.exists() and not (folder / "test.align").exists():
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_write(folder / "test.align") as handle:
            handle.write(links.read_text(encoding="utf-8"))


def training_device(train_config: dict) -> dict[str, str]:
    """The device this process trains on under ``train_config`` (a run's ``train`` settings; ``auto``: CUDA when
    there is a GPU) and the autocast precision of its ``train.amp`` there: a GPU's name with ``bfloat16`` for the
    default ``auto``, ``cpu`` with ``float32`` on a CPU."""
    device = resolve_device(train_config.get("device", "auto"))
    dtype = amp_dtype(train_config.get("amp", "auto"), device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"device": name, "precision": str(dtype or torch.float32).removeprefix("torch.")}


def record(run_dir: Path, name: str, seed: int, overrides: list[str], sources: list[str], hyps_path: Path,
           settings_path: Path) -> None:
    """Translate ``sources`` with the averaged checkpoint; write the hypotheses and the settings (with the CPU
    threads, device and precision the run trained with, the last ones where it was resumed) atomically."""
    run = api.load_run(run_dir, "averaged")
    train_config = read_yaml(run_dir / "config.yaml")["train"]
    hyps = run.translate(sources)
    figures = training_figures(run_dir)
    settings = {
        "system": name, "seed": seed, "overrides": overrides, "updates": figures.updates,
        "train_minutes": round(figures.minutes, 1), "parameters": count_parameters(run.model),
        "averaged": load_checkpoint(run_dir / "checkpoints" / "averaged.pt")["averaged"], "commit": commit_id(),
        "threads": train_config["threads"], **training_device(train_config),
        "dev_loss": dev_loss_curve(run_dir),
    }
    hyps_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(hyps_path) as handle:
        handle.write("".join(f"{hyp}\n" for hyp in hyps))
    with atomic_write(settings_path) as handle:
        yaml.safe_dump(settings, handle, sort_keys=False)
    print(f"== {name} seed {seed}: {hyps_path}", flush=True)


def run_system(args: argparse.Namespace, label: str) -> bool:
    """Train and record one ``SYSTEM.seedN`` of ``args.suite`` (``args.oracle``: on the target-order source
    corpus) under a lock beside its run folder; False, doing nothing, when another process holds the lock."""
    suite = RECIPES / args.suite
    spec, systems = read_yaml(suite / "suite.yaml"), read_yaml(suite / "systems.yaml")
    name, seed = split_seed(label)
    if name not in systems:
        sys.exit(f"unknown system {name}; {suite / 'systems.yaml'} has {sorted(systems)}")
    work = args.work or ROOT / "work" / args.suite
    run_dir = (work / "oracle" if args.oracle else work) / "runs" / label
    with folder_lock(run_dir, wait=False) as held:
        if not held:
            print(f"== {label}: another process is running it", flush=True)
            return False
        recorded = f"oracle_{name}" if args.oracle else name  # beside the corpus's other systems
        hyps_path, settings_path = record_paths(HYPS / spec["corpus"], f"{recorded}.seed{seed}")
        if hyps_path.exists():
            print(f"== {label}: recorded already ({hyps_path})", flush=True)
            return True
        data_dir = args.data_dir or ROOT.parent / "shared" / "data" / spec["corpus"]
        if args.oracle:
            prepare(suite / "prepare.yaml", spec, data_dir, data_folder(work, "prepare.yaml"))
            data_dir = oracle_corpus(data_folder(work, "prepare.yaml"), spec, work / "oracle_corpus")
            work = work / "oracle"
        prepare_file, overrides = system_entry(name, systems[name])
        overrides = [*overrides, f"train.seed={seed}"]
        data = data_folder(work, prepare_file)
        prepare(suite / prepare_file, spec, data_dir, data)
        if not args.oracle:
            keep_test_links(data, HYPS / spec["corpus"])
        train(suite, label, overrides, data, run_dir, int(spec["steps"]), args.threads, [], int(spec["average_last"]))
        sources = read_lines(data_dir / f"{spec['splits']['test']}.{spec['src']}.gz")
        record(run_dir, recorded, seed, overrides, sources, hyps_path, settings_path)
    return True


def run_systems(args: argparse.Namespace) -> None:
    """Train and record each ``SYSTEM.seedN`` named on the command line, in order (:func:`run_system`)."""
    for label in args.systems:
        run_system(args, label)


BASELINE_SEEDS = 3  # each corpus's baseline runs three seeds, to measure the spread the verdict rule uses


def seeds_needed(comparison: Comparison) -> tuple[int, int, bool]:
    """(comparison system, system) seeds that ``comparison``'s verdict needs, the claim's ``seeds`` (default 2)
    of each and :data:`BASELINE_SEEDS` of a corpus's ``baseline``; and whether both want one seed more because
    their first two common seeds' gains have opposite signs (issue 25's protocol: the third seed sharpens the
    mean and the p-value, but cannot change the verdict, whose rule wants the same sign on every seed)."""
    wanted = int(comparison.claim.get("seeds", 2))
    gains = comparison.gains[:2]
    third = wanted == 2 and len(gains) == 2 and min(gains) < 0 < max(gains)
    return max(wanted, BASELINE_SEEDS if comparison.claim["baseline"] == "baseline" else 0), wanted, third


@dataclass(frozen=True)
class PendingRun:
    """A ``SYSTEM.seedN`` that a verdict needs and bench/hyps/CORPUS does not have yet; ``sharpens``: a seed
    beyond what the verdict needs (:func:`seeds_needed`)."""

    corpus: str
    system: str
    seed: int
    sharpens: bool = False

    @property
    def suite(self) -> str:
        """The recipes/ folder that runs it."""
        return suite_folder(self.corpus).name

    @property
    def oracle(self) -> bool:
        """Whether it trains on the target-order source corpus (``run --oracle``)."""
        return self.system.startswith("oracle_")

    @property
    def label(self) -> str:
        """The ``SYSTEM.seedN`` that ``run`` takes (without the ``oracle_`` prefix)."""
        return f"{self.system.removeprefix('oracle_')}.seed{self.seed}"

    def __str__(self) -> str:
        return f"{self.suite} {'--oracle ' if self.oracle else ''}{self.label}"


def pending_runs(claims: list[dict], hyps_root: Path, data_root: Path) -> list[PendingRun]:
    """The runs ``claims`` still need (:func:`seeds_needed`) in the order of issue 25: a corpus at a time (in
    the order the claims name them), within it the corpus's ``baseline`` seeds first, then seed 1 of every
    other system, then seed 2, and so on, systems of one seed in the order the claims name them; last, the
    third seeds that only sharpen a claim's mean."""
    corpora = list(dict.fromkeys(claim["corpus"] for claim in claims))
    needed: dict[tuple[str, str], int] = {}
    wanted: dict[tuple[str, str], int] = {}
    for claim in claims:
        base_count, count, third = seeds_needed(compare(claim, hyps_root, data_root))
        for name, verdict_count in ((claim["baseline"], base_count), (claim["system"], count)):
            key = (claim["corpus"], name)
            needed[key] = max(needed.get(key, 0), verdict_count)
            wanted[key] = max(wanted.get(key, 0), verdict_count, count + third)
    named = list(wanted)
    runs = [PendingRun(corpus, name, seed, seed > needed[corpus, name]) for (corpus, name), count in wanted.items()
            for seed in range(1, count + 1) if seed not in seeds_of(hyps_root / corpus, name)]
    return sorted(runs, key=lambda run: (run.sharpens, corpora.index(run.corpus),
                                         0 if run.system == "baseline" else run.seed,
                                         named.index((run.corpus, run.system))))


def selected_runs(args: argparse.Namespace, claims: list[dict]) -> list[PendingRun]:
    """:func:`pending_runs` of the committed hypotheses, of the claims on ``args.suites``' corpora only where
    given (the other corpora are not read)."""
    picked = [c for c in claims if not args.suites or suite_folder(c["corpus"]).name in args.suites]
    return pending_runs(picked, HYPS, args.data_root)


def work_queue(args: argparse.Namespace, claims: list[dict]) -> None:
    """Run the first pending run that no other process holds (:func:`run_system`), and go on until every
    pending run is recorded or held by another process."""
    while True:
        for run in selected_runs(args, claims):
            print(f"== queue: {run}", flush=True)
            if run_system(argparse.Namespace(suite=run.suite, data_dir=None, work=None, oracle=run.oracle,
                                             threads=args.threads), run.label):
                break
        else:
            print("== queue: nothing left that another process is not running", flush=True)
            return


def main() -> None:
    args = parse_args()
    claims = read_claims()
    if args.verb == "run":
        run_systems(args)
    elif args.verb == "pending":
        print("".join(f"{run}\n" for run in selected_runs(args, claims)), end="")
    elif args.verb == "queue":
        work_queue(args, claims)
    else:
        write_tables(claims, args.hyps, args.data_root, args.out, args.results)


if __name__ == "__main__":
    main()
