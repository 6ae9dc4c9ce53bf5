"""Equal-budget system comparisons on one corpus (the papers' Table 1 on our data).

A suite is a folder of recipes/ with suite.yaml (corpus, languages, split names, metric, update budget: its
``steps``, or the budgets file it names, of which ``--budget NAME`` picks one: recipes/budgets.py),
prepare.yaml, train.yaml and systems.yaml (name -> --set overrides over train.yaml, or name ->
{prepare: FILE, set: [overrides]} for a system whose data comes from another prepare config of the suite,
e.g. one segmentation or a lattice, or name -> {same_as: OTHER} for another name of a system, e.g. a sweep's
centre point). This script prepares each prepare config's data once, trains each named system for the same
number of updates from the same seed (an existing run is resumed, a finished one skipped), averages its last
checkpoints (the budget's count; 4 for a suite without budgets), then writes under WORK/reports/REPORT the
systems table (BLEU, sign test against the first system, parameters, training and translation speed), BLEU by
source length, and optionally the swapped-word robustness curves.

usage: python recipes/compare.py --suite enja_compare --report NAME [--data-dir DIR] [--work DIR]
           [--budget NAME] [--steps N] [--set KEY=VALUE ...] [--robustness SYS,SYS] SYSTEM [SYSTEM ...]

A --set changes every system's configuration: give such a run its own --work folder (a trained system whose
settings differ from those asked for, or data prepared from other corpus files, is refused, not reused).
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import gzip
import hashlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import yaml

if not __package__:  # run as `python recipes/NAME.py`: the repository root, not recipes/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from ordo import api
from ordo.analysis.report import length_report, robustness_report, sweep_report, systems_report
from ordo.checkpoint import step_checkpoints
from ordo.cli import main as ordo
from ordo.config import ExperimentConfig, build_config, merge, parse_overrides
from ordo.data.textio import atomic_write, read_lines, read_yaml
from ordo.errors import ConfigError
from recipes.budgets import DEFAULT, folder_budget

RECIPES = Path(__file__).resolve().parent
ROOT = RECIPES.parent
CORPUS_STAMP = "corpus.yaml"  # in a prepared data folder: the corpus files it was prepared from
# train settings that leave a finished run's weights unchanged, so a report may reuse it under other values
# (max_steps too: a finished run may be trained on to a larger budget)
RESULT_NEUTRAL = {"threads", "max_minutes", "log_every", "progress", "max_steps"}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("systems", nargs="+", help="names from systems.yaml; the first is the baseline")
    parser.add_argument("--suite", required=True, help="folder of recipes/ with suite.yaml and the configs")
    parser.add_argument("--report", required=True, help="name of the report folder")
    parser.add_argument("--data-dir", type=Path, help="corpus folder (default: the suite's, in ../shared/data)")
    parser.add_argument("--work", type=Path, help="default: work/SUITE")
    parser.add_argument("--budget", help=f"a budget of the suite's budgets file (default: {DEFAULT}; a suite "
                        "without budgets has one: its suite.yaml's steps)")
    parser.add_argument("--steps", type=int, help="updates per system, the equal budget (default: the budget's)")
    parser.add_argument("--threads", type=int, help="torch CPU threads for training (default: train.yaml's)")
    parser.add_argument("--robustness", default="", help="comma-separated systems for the swapped-word curves")
    parser.add_argument("--set", dest="common", action="append", default=[], metavar="KEY=VALUE",
                        help="override for every system, before its own (e.g. model.d_model=128 for a smaller scale)")
    return parser.parse_args()


def system_entry(name: str, entry: object) -> tuple[str, list[str]]:
    """A systems.yaml entry as (prepare config file name, --set overrides)."""
    if isinstance(entry, list):
        return "prepare.yaml", [str(item) for item in entry]
    if isinstance(entry, dict) and set(entry) <= {"prepare", "set"}:
        return str(entry.get("prepare", "prepare.yaml")), [str(item) for item in entry.get("set", [])]
    sys.exit(f"systems.yaml: {name}: expected a list of overrides or {{prepare: FILE, set: [...]}}, got {entry!r}")


def aliases(systems: dict) -> dict[str, str]:
    """The systems.yaml entries ``NAME: {same_as: OTHER}`` as NAME -> OTHER: another name for a system, e.g. the
    centre point of a sweep (``rnn_h_lambda@0.5`` is ``rnn_h_distortion``), so that it is trained once."""
    return {name: str(entry["same_as"]) for name, entry in systems.items()
            if isinstance(entry, dict) and set(entry) == {"same_as"}}


def with_aliases(scores: dict[str, float], names: dict[str, str]) -> dict[str, float]:
    """``scores`` plus a score under each alias ``BASE@VALUE`` of a scored system when another ``BASE@`` system
    was scored too: the centre points of the sweep plots."""
    swept = {name.partition("@")[0] for name in scores if "@" in name}
    return {**scores, **{alias: scores[target] for alias, target in names.items()
                         if target in scores and alias.partition("@")[0] in swept}}


def own_sources(spec: dict, systems: dict, names: list[str]) -> list[str]:
    """The systems of ``names`` whose prepare config reads other source files than the suite's (suite.yaml's
    ``sources``, as nist_verdict's lattice systems read the unsegmented Chinese): this script prepares every
    system from ``SPLIT.SRC.gz`` and translates one test source for all, so it cannot run them
    (recipes/replicate.py can: :func:`recipes.verdicts.run_spec`)."""
    sources = spec.get("sources") or {}
    return [name for name in names if system_entry(name, systems[name])[0] in sources]


def data_folder(work: Path, prepare_file: str) -> Path:
    """WORK/data for the suite's prepare.yaml, WORK/data_STEM for another prepare config."""
    stem = Path(prepare_file).stem
    return work / ("data" if stem == "prepare" else f"data_{stem.removeprefix('prepare_')}")


def corpus_stamp(files: dict[str, str]) -> dict[str, str]:
    """The corpus files a data folder is prepared from: each prepare flag with its file's name and the SHA-256 of
    its text (decompressed, so that gzip's stored name and time do not count)."""
    return {flag: f"{Path(path).name} {hashlib.sha256(gzip.decompress(Path(path).read_bytes())).hexdigest()}"
            for flag, path in files.items()}


@contextmanager
def folder_lock(folder: Path, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on ``folder`` (the file ``FOLDER.lock`` beside it) while the block runs, so that
    runs started side by side prepare a folder once, one after the other. With ``wait`` False the block gets
    False at once, holding nothing, when another process holds the lock."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True


def prepare(config: Path, spec: dict, data_dir: Path, out: Path) -> None:
    """Binarize the corpus with one prepare config, once: OUT is reused when it was prepared from the same corpus
    files (OUT/corpus.yaml, written when ``ordo prepare`` has finished), refused when it was prepared from others,
    and prepared again where it has no corpus.yaml: a preparation that stopped part way (``ordo prepare`` writes
    data.yaml before it aligns, for one). Runs side by side wait for each other (:func:`folder_lock`)."""
    with folder_lock(out):
        files = {f"--{split}-{side}": str(data_dir / f"{spec['splits'][split]}.{spec[side]}.gz")
                 for split in ("train", "valid", "test") for side in ("src", "tgt")}
        stamp = corpus_stamp(files)
        if (out / CORPUS_STAMP).exists():
            if read_yaml(out / CORPUS_STAMP) != stamp:
                sys.exit(f"{out} was prepared from other corpus files than those in {data_dir}: give this corpus its "
                         "own --work folder")
            return
        if (out / "data.yaml").exists():
            print(f"{out} has no {CORPUS_STAMP}: its preparation stopped part way, preparing it again", flush=True)
        args = ["prepare", str(config), "--out", str(out)]
        for flag, path in files.items():
            args += [flag, path]
        if ordo(args) != 0:
            sys.exit("prepare failed")
        with atomic_write(out / CORPUS_STAMP) as handle:
            yaml.safe_dump(stamp, handle)


def changed_settings(run_dir: Path, requested: ExperimentConfig) -> list[str]:
    """The model and train settings (``section.key``) in which the ``requested`` config, built from the request
    alone, differs from a run's saved config, leaving out those that leave the weights unchanged
    (RESULT_NEUTRAL)."""
    saved = build_config(read_yaml(run_dir / "config.yaml"), str(run_dir / "config.yaml"))
    changed = [] if saved.model == requested.model else ["model"]
    return changed + [f"train.{key}" for key, value in dataclasses.asdict(requested.train).items()
                      if key not in RESULT_NEUTRAL and getattr(saved.train, key) != value]


def train(suite: Path, name: str, overrides: list[str], data: Path, run_dir: Path, steps: int,
          threads: int | None, common: list[str], average_last: int = 4) -> None:
    """Train (or resume) one system to ``steps`` updates and average its last ``average_last`` checkpoints; an
    existing run is resumed or reused only when it was started with the settings asked for now."""
    extra = [f"train.threads={threads}"] if threads else []
    raw = merge(read_yaml(suite / "train.yaml"),
                parse_overrides([f"data={data}", f"train.max_steps={steps}", *extra, *common, *overrides]))
    if (run_dir / "config.yaml").exists():
        changed = changed_settings(run_dir, build_config(raw, str(suite / "train.yaml")))
        if changed:
            sys.exit(f"{name}: {run_dir} was started with other settings ({', '.join(changed)}); give this "
                     "comparison its own --work folder")
    done = step_checkpoints(run_dir / "checkpoints")
    if done and done[-1].name == f"step_{steps}.pt" and (run_dir / "checkpoints" / "averaged.pt").exists():
        print(f"== {name}: trained ({steps} updates)", flush=True)
        return
    print(f"== {name}: training to {steps} updates", flush=True)
    api.train(api.run_config(run_dir, raw), run_dir)
    api.average(run_dir, last=average_last)


def read_table(path: Path) -> list[list[str]]:
    """The rows of a TSV table written by ``ordo analyze``, header left out."""
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:]]


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    suite = RECIPES / args.suite
    spec = read_yaml(suite / "suite.yaml")
    systems = read_yaml(suite / "systems.yaml")
    unknown = [s for s in args.systems if s not in systems]
    if unknown:
        sys.exit(f"unknown systems {unknown}; {suite / 'systems.yaml'} has {sorted(systems)}")
    other_names = aliases(systems)
    elsewhere = own_sources(spec, systems, [other_names.get(s, s) for s in args.systems])
    if elsewhere:
        sys.exit(f"{suite / 'suite.yaml'}: {', '.join(elsewhere)} read other source files (sources:), which "
                 f"compare.py does not: run them with recipes/replicate.py run --suite {args.suite}")
    try:
        budget = folder_budget(suite, args.budget)
    except ConfigError as error:
        sys.exit(f"error: {error}")
    data_dir = args.data_dir or ROOT.parent / "shared" / "data" / spec["corpus"]
    work = args.work or ROOT / "work" / args.suite
    steps = args.steps or budget.steps
    runs = []
    for name in dict.fromkeys(other_names.get(s, s) for s in args.systems):
        prepare_file, overrides = system_entry(name, systems[name])
        data = data_folder(work, prepare_file)
        prepare(suite / prepare_file, spec, data_dir, data)
        run_dir = work / "runs" / name
        train(suite, name, overrides, data, run_dir, steps, args.threads, [*budget.schedule_overrides, *args.common],
              budget.average_last)
        runs.append((name, run_dir))
    test = spec["splits"]["test"]
    sources = read_lines(data_dir / f"{test}.{spec['src']}.gz")
    refs = read_lines(data_dir / f"{test}.{spec['tgt']}.gz")
    tokenized = bool(spec.get("tokenized", False))
    out = work / "reports" / args.report
    print(systems_report(runs, sources, refs, out, "averaged", tokenized_bleu=tokenized))
    scores = {row[0]: float(row[2 if tokenized else 1]) for row in read_table(out / "systems.tsv")}
    sweep = sweep_report(with_aliases(scores, other_names), out, runs[0][0])
    if sweep:
        print(sweep)
    hyps = [(name, (out / f"{name}.hyp").read_text(encoding="utf-8").splitlines()) for name, _ in runs]
    print(length_report(hyps, sources, refs, out, tokenized_bleu=tokenized, unit=spec.get("length_unit", "words")))
    chosen = [r for r in runs if r[0] in args.robustness.split(",")]
    if chosen:
        fractions = [p / 100 for p in range(0, 101, 10)]
        print(robustness_report(chosen, sources, refs, out, fractions, 1, "averaged", tokenized_bleu=tokenized))
    print(f"tables and plots: {out}")


if __name__ == "__main__":
    main()
