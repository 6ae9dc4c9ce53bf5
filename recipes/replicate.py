"""The verdict runs (issue 25): each system of a suite under several seeds, at the suite's fixed update budget,
with the small files anyone can rescore from committed under bench/hyps/CORPUS/.

``run`` trains (or resumes) each ``SYSTEM.seedN`` of a suite (recipes/SUITE/systems.yaml's overrides plus
``train.seed=N``) to suite.yaml's ``steps`` updates, averages its last ``average_last`` checkpoints, translates
the test set with beam search, and writes ``bench/hyps/CORPUS/SYSTEM.seedN.txt`` (one line per source line)
and ``SYSTEM.seedN.yaml`` (overrides, updates, training minutes, parameters, checkpoints averaged, commit,
dev loss curve). ``--oracle`` trains the suite's systems on the corpus whose every source sentence is put in
target order by the prepared data's word alignments (paper 000's Figure 2 upper bound), as ``oracle_SYSTEM``.

``tables`` rebuilds the verdicts from those files alone (recipes/verdicts.yaml lists the claims): BLEU of every
seed, the paired difference per seed, the baseline's seed standard deviation, sacreBLEU's two-sided paired
bootstrap p over the pooled seeds, and the verdict by the rule stated in bench/RESULTS.md (:func:`verdict`);
the table is written to bench/results/verdicts.md and replaces the one in bench/RESULTS.md. Where a corpus
has ``bench/hyps/CORPUS/test.align`` (the prepared test split's eflomal links, which ``run`` copies there), a
second table scores every system by reordering difficulty: BLEU and RIBES per third of the test pairs by
alignment τ (:func:`ordo.evaluation.order.difficulty_buckets`), averaged over seeds, with the mean difference
per common seed to the system it is compared with (bench/results/verdicts_order.md, and in RESULTS.md). Two
figures go to bench/results/figures/: the gains over seeds against the rule's band (verdicts_gains.png) and
each comparison's dev loss curves (verdicts_dev_loss.png).

``pending`` lists the runs the verdicts still need, in the order they are worth running (:func:`pending_runs`):
the baseline's three seeds, then one seed of every system, then the second seeds, a corpus at a time, and a
third seed of both systems of a claim whose first two seeds disagree on the sign of the gain. ``queue`` works
that list off, the next run no other worker holds each time, until nothing is left: two workers of one thread
each, started side by side, share the queue.

usage: python recipes/replicate.py run --suite enja_verdict [--work DIR] [--oracle] SYSTEM.seedN [...]
       python recipes/replicate.py pending [--suite SUITE ...]
       python recipes/replicate.py queue [--suite SUITE ...] [--threads N]
       python recipes/replicate.py tables [--out bench/results/verdicts.md] [--results bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import gzip
import re
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from compare import RECIPES, ROOT, data_folder, folder_lock, prepare, system_entry, train

from ordo import api
from ordo.analysis.plots import curve_panels, gain_plot
from ordo.analysis.systems import bleu_metric, training_figures
from ordo.analysis.tables import markdown_table
from ordo.build import count_parameters
from ordo.cli import main as ordo
from ordo.data.alignment.links import read_links
from ordo.data.textio import atomic_write, read_lines, read_yaml
from ordo.errors import ConfigError, InputError
from ordo.evaluation.order import (
    DifficultyBucket,
    alignment_tau,
    corpus_ribes,
    difficulty_buckets,
    ribes_tokens,
)
from ordo.evaluation.significance import bleu_bootstrap_p
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
    run.add_argument("--threads", type=int, help="CPU threads per run (default: the suite's train.yaml); two queues "
                     "of one thread each train about 20%% more updates per hour on 2 cores than one of two")
    for verb, text in (("pending", "list the runs the verdicts still need"),
                       ("queue", "run what the verdicts still need, beside other workers")):
        listing = verbs.add_parser(verb, help=text)
        listing.add_argument("--suite", action="append", dest="suites", metavar="SUITE",
                             help="only this suite's runs (repeatable; default: every verdict suite)")
        listing.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data", help="corpus folders")
    listing.add_argument("--threads", type=int, help="CPU threads of each run (as for run)")
    tables = verbs.add_parser("tables", help="rebuild the verdicts table from bench/hyps/")
    tables.add_argument("--hyps", type=Path, default=HYPS,
                        help="folder of CORPUS/SYSTEM.seedN.txt (default: %(default)s)")
    tables.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data", help="corpus folders")
    tables.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "verdicts.md")
    tables.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md",
                        help="document whose verdicts table is replaced too (default: %(default)s; '' for none)")
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
    """The prepared test split's word links (``data/test.align``, when prepared with alignments) copied once to
    ``folder/test.align``, so that the tables can bucket the test pairs by reordering difficulty."""
    links = data / "test.align"
    if links.exists() and not (folder / "test.align").exists():
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_write(folder / "test.align") as handle:
            handle.write(links.read_text(encoding="utf-8"))


def record(run_dir: Path, name: str, seed: int, overrides: list[str], sources: list[str], hyps_path: Path,
           settings_path: Path) -> None:
    """Translate ``sources`` with the averaged checkpoint; write the hypotheses and the settings (with the CPU
    threads the run trained with, the last ones where it was resumed) atomically."""
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


def mean_ribes(runs: dict[int, list[str]], refs: list[str], tokenized: bool) -> float | None:
    """RIBES x100 (:mod:`ordo.evaluation.order`) averaged over the seeds in ``runs``, None if there are none."""
    if not runs:
        return None
    ref_tokens = ribes_tokens(refs, tokenized)
    return 100 * statistics.fmean(corpus_ribes(ribes_tokens(hyps, tokenized), ref_tokens) for hyps in runs.values())


def suite_folder(corpus: str) -> Path:
    """The verdict suite (``recipes/*_verdict``) of ``corpus``."""
    for path in sorted(RECIPES.glob("*_verdict/suite.yaml")):
        if read_yaml(path)["corpus"] == corpus:
            return path.parent
    sys.exit(f"no recipes/*_verdict/suite.yaml for corpus {corpus}")


def suite_of(corpus: str) -> dict:
    """The suite.yaml of the verdict suite of ``corpus``."""
    return read_yaml(suite_folder(corpus) / "suite.yaml")


def references(corpus: str, spec: dict, data_root: Path) -> list[str]:
    """The references of ``corpus``'s test split (``spec`` its suite.yaml) in ``data_root/CORPUS``."""
    return read_lines(data_root / corpus / f"{spec['splits']['test']}.{spec['tgt']}.gz")


@dataclass
class Comparison:
    """A claim's two systems on its corpus: their test hypotheses and BLEU by seed, and the references."""

    claim: dict
    refs: list[str]
    tokenized: bool
    base: dict[int, list[str]]
    system: dict[int, list[str]]
    base_bleu: dict[int, float]
    system_bleu: dict[int, float]

    @property
    def label(self) -> str:
        """``SYSTEM vs BASELINE (CORPUS)``."""
        return f"{self.claim['system']} vs {self.claim['baseline']} ({self.claim['corpus']})"

    @property
    def common(self) -> list[int]:
        """The seeds both systems have."""
        return sorted(set(self.base) & set(self.system))

    @property
    def ready(self) -> bool:
        """Whether a verdict can be given: two baseline seeds and the claim's ``seeds`` (default 2) in common."""
        return len(self.base) >= 2 and len(self.common) >= int(self.claim.get("seeds", 2))

    @property
    def gains(self) -> list[float]:
        """The system's BLEU minus the baseline's, per common seed."""
        return [self.system_bleu[s] - self.base_bleu[s] for s in self.common]

    @property
    def baseline_sd(self) -> float:
        """The standard deviation of the baseline's BLEU over its seeds (needs two)."""
        return statistics.stdev(self.base_bleu.values())


def compare(claim: dict, hyps_root: Path, data_root: Path) -> Comparison:
    """The committed hypotheses of ``claim``'s baseline and system (``hyps_root/CORPUS``), scored by seed."""
    spec = suite_of(claim["corpus"])
    refs = references(claim["corpus"], spec, data_root)
    bleu = bleu_metric(bool(spec.get("tokenized")))
    base = seeds_of(hyps_root / claim["corpus"], claim["baseline"])
    system = seeds_of(hyps_root / claim["corpus"], claim["system"])
    return Comparison(claim, refs, bool(spec.get("tokenized")), base, system,
                      {seed: bleu(hyps, refs) for seed, hyps in base.items()},
                      {seed: bleu(hyps, refs) for seed, hyps in system.items()})


def pooled_bootstrap_p(base: dict[int, list[str]], system: dict[int, list[str]], refs: list[str],
                       indices: Sequence[int]) -> float:
    """sacreBLEU's two-sided paired bootstrap p of ``system`` against ``base`` (hypotheses by seed) on the test
    pairs ``indices``, the pairs of every seed the two have in common pooled into one test set."""
    common = sorted(set(base) & set(system))
    pooled = [[runs[s][i] for s in common for i in indices] for runs in (base, system)]
    return bleu_bootstrap_p(*pooled, [refs[i] for _ in common for i in indices])


def claim_row(comparison: Comparison, hyps_root: Path) -> list[str]:
    """One row of the verdicts table; a claim is pending until the comparison is :attr:`Comparison.ready`."""
    claim, base, system = comparison.claim, comparison.base, comparison.system
    listed = ", ".join(f"{comparison.system_bleu[s]:.2f}" for s in sorted(system)) or "-"
    minutes = [mean_minutes(hyps_root / claim["corpus"], claim[side]) for side in ("system", "baseline")]
    ribes = [mean_ribes(runs, comparison.refs, comparison.tokenized) for runs in (system, base)]
    cells = [claim["paper"], claim["claim"], claim["corpus"], f"{claim['system']} vs {claim['baseline']}", listed,
             " / ".join("-" if m is None else f"{m:.0f}" for m in minutes),
             " / ".join("-" if r is None else f"{r:.2f}" for r in ribes)]
    if not comparison.ready:
        return [*cells, "-", "-", "-", f"pending ({len(base)} baseline, {len(system)} system seeds)"]
    gains = comparison.gains
    p_value = pooled_bootstrap_p(base, system, comparison.refs, range(len(comparison.refs)))
    gain_cell = f"{statistics.fmean(gains):+.2f} ({', '.join(f'{g:+.2f}' for g in gains)})"
    return [*cells, gain_cell, f"{comparison.baseline_sd:.2f} ({len(base)} seeds)", f"{p_value:.3g}",
            verdict(gains, comparison.baseline_sd)]


BASELINE_SEEDS = 3  # each corpus's baseline runs three seeds, to measure the spread the verdict rule uses


def seeds_needed(comparison: Comparison) -> tuple[int, int]:
    """(comparison system, system) seeds that ``comparison``'s verdict needs: the claim's ``seeds`` (default 2)
    of each, :data:`BASELINE_SEEDS` of a corpus's ``baseline``, and one more of both where the first two
    common seeds' gains have opposite signs."""
    wanted = int(comparison.claim.get("seeds", 2))
    gains = comparison.gains[:2]
    if wanted == 2 and len(gains) == 2 and min(gains) < 0 < max(gains):
        wanted = 3
    base_wanted = max(wanted, BASELINE_SEEDS if comparison.claim["baseline"] == "baseline" else 0)
    return base_wanted, wanted


@dataclass(frozen=True)
class PendingRun:
    """A ``SYSTEM.seedN`` that a verdict needs and bench/hyps/CORPUS does not have yet."""

    corpus: str
    system: str
    seed: int

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
    other system, then seed 2, and so on; systems of one seed in the order the claims name them."""
    corpora = list(dict.fromkeys(claim["corpus"] for claim in claims))
    wanted: dict[tuple[str, str], int] = {}
    for claim in claims:
        counts = seeds_needed(compare(claim, hyps_root, data_root))
        for name, count in zip((claim["baseline"], claim["system"]), counts):
            key = (claim["corpus"], name)
            wanted[key] = max(wanted.get(key, 0), count)
    named = list(wanted)
    runs = [PendingRun(corpus, name, seed) for (corpus, name), count in wanted.items()
            for seed in range(1, count + 1) if seed not in seeds_of(hyps_root / corpus, name)]
    return sorted(runs, key=lambda run: (corpora.index(run.corpus), 0 if run.system == "baseline" else run.seed,
                                         named.index((run.corpus, run.system))))


def selected_runs(args: argparse.Namespace, claims: list[dict]) -> list[PendingRun]:
    """:func:`pending_runs` of the committed hypotheses, of ``args.suites`` only where given."""
    runs = pending_runs(claims, HYPS, args.data_root)
    return [run for run in runs if not args.suites or run.suite in args.suites]


def work_queue(args: argparse.Namespace, claims: list[dict]) -> None:
    """Run the first pending run that no other worker holds (a lock beside its run folder), record it, and
    go on until every pending run is done or held by another worker."""
    while True:
        for run in selected_runs(args, claims):
            work = ROOT / "work" / run.suite / ("oracle" if run.oracle else "")
            with folder_lock(work / "runs" / run.label, wait=False) as held:
                if held:
                    print(f"== queue: {run}", flush=True)
                    run_systems(argparse.Namespace(suite=run.suite, data_dir=None, work=None, oracle=run.oracle,
                                                   threads=args.threads, systems=[run.label]))
                    break
        else:
            print("== queue: nothing left that another worker is not running", flush=True)
            return


def pair_taus(path: Path, pairs: int) -> list[float]:
    """Kendall's τ of the sure links of each line of the Pharaoh file ``path``, which must have ``pairs`` lines.

    Raises:
        InputError: naming ``path``, when its line count is not ``pairs``.
    """
    taus = [alignment_tau(sorted(sentence.sure)) for sentence in read_links(path)]
    if len(taus) != pairs:
        raise InputError(f"{path}: {len(taus)} lines of links for {pairs} test pairs")
    return taus


def compared_systems(claims: list[dict], corpus: str) -> dict[str, str | None]:
    """Each system of ``corpus``'s claims -> the system it is compared with (None for a comparison system),
    comparison systems first where they come first in the claims."""
    against: dict[str, str | None] = {}
    for claim in claims:
        if claim["corpus"] == corpus:
            against.setdefault(claim["baseline"], None)
            against.setdefault(claim["system"], claim["baseline"])
    return against


def bucket_scores(runs: dict[int, list[str]], refs: list[str], buckets: list[DifficultyBucket],
                  tokenized: bool) -> dict[int, list[tuple[float, float]]]:
    """(BLEU, RIBES x100) of every bucket of test pairs, by seed."""
    bleu = bleu_metric(tokenized)
    ribes_refs = ribes_tokens(refs, tokenized)
    scores = {}
    for seed, hyps in runs.items():
        ribes_hyps = ribes_tokens(hyps, tokenized)
        scores[seed] = [(bleu([hyps[i] for i in b.indices], [refs[i] for i in b.indices]),
                         100 * corpus_ribes([ribes_hyps[i] for i in b.indices], [ribes_refs[i] for i in b.indices]))
                        for b in buckets]
    return scores


def bucket_cell(scores: dict[int, list[tuple[float, float]]], against: dict[int, list[tuple[float, float]]] | None,
                bucket: int, metric: int) -> str:
    """The mean over seeds of one metric (0 BLEU, 1 RIBES) in one bucket, with the mean difference over the
    seeds in common with ``against`` in brackets; ``against`` None marks a comparison system, whose seed
    standard deviation goes in the brackets instead."""
    values = [by_bucket[bucket][metric] for by_bucket in scores.values()]
    mean = statistics.fmean(values)
    common = sorted(set(scores) & set(against or {}))
    if against is None:
        return f"{mean:.2f} (sd {statistics.stdev(values):.2f})" if len(values) > 1 else f"{mean:.2f}"
    if not common:
        return f"{mean:.2f}"
    gain = statistics.fmean(scores[s][bucket][metric] - against[s][bucket][metric] for s in common)
    return f"{mean:.2f} ({gain:+.2f})"


ORDER_HEADER = ["corpus", "system", "seeds", "BLEU: hardest τ third (Δ)", "BLEU: middle third (Δ)",
                "BLEU: most monotone third (Δ)", "RIBES: hardest third (Δ)", "RIBES: most monotone third (Δ)",
                "bootstrap p, hardest third"]


def bucket_p(base: dict[int, list[str]], system: dict[int, list[str]], refs: list[str], indices: list[int]) -> str:
    """:func:`pooled_bootstrap_p` on the test pairs ``indices``, formatted ("-" without a common seed)."""
    if not set(base) & set(system):
        return "-"
    return f"{pooled_bootstrap_p(base, system, refs, indices):.3g}"


def order_rows(corpus: str, claims: list[dict], hyps_root: Path, data_root: Path) -> list[list[str]]:
    """The reordering-difficulty rows of ``corpus`` (none without ``hyps_root/CORPUS/test.align``): the τ range
    and size of each third of the test pairs, then every system of its claims that has seeds, each bucket's
    BLEU and RIBES averaged over seeds and, in brackets, the mean difference to its comparison system (the seed
    standard deviation for a comparison system), and the bootstrap p of that difference in the hardest third."""
    folder = hyps_root / corpus
    if not (folder / "test.align").exists():
        return []
    spec = suite_of(corpus)
    refs = references(corpus, spec, data_root)
    buckets = difficulty_buckets(pair_taus(folder / "test.align", len(refs)))
    columns = [0, 1, len(buckets) - 1] if len(buckets) == 3 else [0, None, len(buckets) - 1]
    ranges = ["-" if b is None else f"{buckets[b].label} ({len(buckets[b].indices)} pairs)" for b in columns]
    rows = [[corpus, "test pairs", "-", *ranges, ranges[0], ranges[2], "-"]]
    scores, hyps = {}, {}
    for system, against in compared_systems(claims, corpus).items():
        hyps[system] = seeds_of(folder, system)
        if not hyps[system]:
            continue
        scores[system] = bucket_scores(hyps[system], refs, buckets, bool(spec.get("tokenized")))
        base = scores.get(against, {}) if against else None  # {}: its comparison system has no seeds yet
        cells = [[("-" if b is None else bucket_cell(scores[system], base, b, metric)) for b in bucket_columns]
                 for metric, bucket_columns in ((0, columns), (1, [columns[0], columns[2]]))]
        p_value = bucket_p(hyps[against], hyps[system], refs, buckets[0].indices) if against else "-"
        rows.append([corpus, system if against is None else f"{system} vs {against}", str(len(hyps[system])),
                     *cells[0], *cells[1], p_value])
    return rows


DEV_CURVE_FROM = 500  # the first updates' fall (5.3 -> 2.5 dev loss) would flatten the gaps that matter


def mean_dev_loss(folder: Path, system: str) -> dict[int, float]:
    """The dev loss curve of ``system`` averaged over its recorded seeds (SYSTEM.seedN.yaml), at the updates
    every seed has."""
    curves = [read_yaml(path).get("dev_loss") or {} for path in folder.glob(f"{system}.seed*.yaml")]
    if not curves:
        return {}
    updates = set.intersection(*(set(curve) for curve in curves))
    return {int(update): statistics.fmean(curve[update] for curve in curves) for update in sorted(updates)}


def write_figures(comparisons: list[Comparison], hyps_root: Path, figures: Path) -> list[Path]:
    """``figures/verdicts_gains.png``: each ready comparison's gain per seed, their mean and the verdict rule's
    band of twice the baseline's seed sd; ``figures/verdicts_dev_loss.png``: every comparison's two dev loss
    curves, each averaged over its seeds, so that a gap which closes with training shows."""
    paths = []
    ready = [c for c in comparisons if c.ready]
    if ready:
        paths.append(gain_plot([(c.label, c.gains, 2 * c.baseline_sd) for c in ready],
                               "BLEU gain (dots: seeds; bar: mean; grey: ±2 baseline sd)",
                               figures / "verdicts_gains.png", "Verdicts: gains over seeds"))
    panels = []
    for c in comparisons:
        curves = {c.claim[side]: mean_dev_loss(hyps_root / c.claim["corpus"], c.claim[side])
                  for side in ("system", "baseline")}
        if all(curves.values()):
            panels.append((c.label, curves))
    if panels:
        paths.append(curve_panels(panels, "update", "dev loss", figures / "verdicts_dev_loss.png",
                                  x_from=DEV_CURVE_FROM))
    return paths


def write_tables(args: argparse.Namespace, claims: list[dict]) -> None:
    """The verdicts table of every claim (recipes/verdicts.yaml) and the table by reordering difficulty,
    printed, written to ``args.out`` and beside it (``_order``), and put in place in ``args.results``; the
    figures of :func:`write_figures` in ``figures/`` beside ``args.out``."""
    header = ["paper", "claim (paper's setting)", "corpus", "comparison", "BLEU by seed", "train min (system / base)",
              "RIBES (system / base)",
              "gain: mean (per seed)", "baseline seed sd", "bootstrap p (pooled seeds)", "verdict"]
    comparisons = [compare(claim, args.hyps, args.data_root) for claim in claims]
    tables = {args.out: markdown_table(header, [claim_row(comparison, args.hyps) for comparison in comparisons])}
    corpora = dict.fromkeys(claim["corpus"] for claim in claims)
    order = [row for corpus in corpora for row in order_rows(corpus, claims, args.hyps, args.data_root)]
    if order:
        tables[args.out.with_name(f"{args.out.stem}_order.md")] = markdown_table(ORDER_HEADER, order)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_figures(comparisons, args.hyps, args.out.parent / "figures")
    for path, table in tables.items():
        with atomic_write(path) as handle:
            handle.write(table)
        if str(args.results):
            document = replace_table(args.results.read_text(encoding="utf-8"), table, args.results)
            with atomic_write(args.results) as handle:
                handle.write(document)
        print(table)


def replace_table(document: str, table: str, where: Path) -> str:
    """``document`` with the markdown table that starts with ``table``'s header line replaced by ``table``.

    Raises:
        ConfigError: no line of ``document`` is that header (named by ``where``).
    """
    lines = document.splitlines(keepends=True)
    header = table.splitlines(keepends=True)[0]
    if header not in lines:
        raise ConfigError(f"{where}: no table with the header {header.strip()!r} to replace")
    start = lines.index(header)
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "".join([*lines[:start], table, *lines[end:]])


def main() -> None:
    args = parse_args()
    claims = yaml.safe_load((RECIPES / "verdicts.yaml").read_text(encoding="utf-8"))
    if args.verb == "run":
        run_systems(args)
    elif args.verb == "pending":
        print("".join(f"{run}\n" for run in selected_runs(args, claims)), end="")
    elif args.verb == "queue":
        work_queue(args, claims)
    else:
        write_tables(args, claims)


if __name__ == "__main__":
    main()
