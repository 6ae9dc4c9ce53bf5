"""The verdicts (issues 25 and 40) rebuilt from the committed files alone: recipes/verdicts.yaml lists the claims,
each a method system against its comparison system on one corpus, and bench/results/hyps/CORPUS/SET/SYSTEM.seedN.{txt,yaml}
(written by ``recipes/replicate.py run``) hold every finished run's test hypotheses and settings, one folder per
exchangeable set of runs (one device, CPU thread count and precision; replicate.set_name).

Every claim gets one row per set that has runs of its systems. Its verdict is due at the claim's ``seeds`` a side,
or later where the test of those first seeds is inconclusive and no more than ten seeds a side would detect the
paper's gain at their spread: then at that many (:attr:`Comparison.seeds_due`; issue 40's rule, which
``replicate.py pending`` follows), on each side's lowest-numbered seeds (:func:`judged_seeds`). A comparison whose runs differ in commit, device,
CPU threads (on a CPU), precision, budget (recipes/budgets.py) or prepared data (hash) is refused, with what
differs (:func:`differences`).
The runs before issue 40 lie in ``CORPUS/first_pass`` (mixed commits and machines): only the claims marked
``first_pass`` are judged on them, unrefused but marked as such, and the other claims never. A set folder that
holds a ``RETIRED`` file (why, and the set that goes on instead) gets no verdict rows and no more runs
(``replicate.py queue``); its runs stay in the table of every run and the order table. A claim may name a
``series``: a new set of runs for it alone, pre-registered with its own ``seeds`` before its runs (a fixed count,
e.g. the seeds an inconclusive claim's first set said its paper's gain needs), in folders ``SET.SERIES``
(:func:`series_set`; ``replicate.py run --series``) that no other claim is judged on, as no series claim is on
the sets outside its series (:func:`in_folder`).

:func:`write_tables` scores them: BLEU of every seed and the test over seeds of :mod:`ordo.evaluation.seeds` (the
mean gain, its 95% interval and p, the minimum detectable gain, the seeds per side that detect the claim's
``paper_gain``, sacreBLEU's paired bootstrap p over the pooled seeds beside it, and the verdict word), written
to bench/results/verdicts.md, with a summary (both gains, the verdict) in bench/results/verdicts_summary.md, its
rows that have a verdict in place in bench/RESULTS.md; the same test on RIBES
(bench/results/verdicts_ribes.md); a table of every finished run (bench/results/verdicts_runs.md); and, where a
corpus has ``bench/results/hyps/CORPUS/test.align`` (the prepared test split's eflomal links), BLEU and RIBES per third of
the test pairs by alignment τ (:func:`ordo.evaluation.order.difficulty_buckets`), averaged over seeds, with the
mean difference per common seed to the system it is compared with (bench/results/verdicts_order.md). Three
figures go to bench/results/figures/: each comparison's gain with its interval and the paper's gain
(verdicts_gains.png), each comparison's dev loss curves (verdicts_dev_loss.png), and each system's gain per third
of reordering difficulty (verdicts_order_CORPUS_SET.png).

The references are the test split of each corpus's folder (:class:`CorpusFolders`): the one given to the
tables, else the one its runs recorded having trained on (``corpus_dir`` in their settings), else the suite's
own; a claim with no runs yet needs none.
"""

from __future__ import annotations

import functools
import os
import re
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from ordo.analysis.plots import curve_panels, gain_plot, line_plot
from ordo.analysis.tables import markdown_table
from ordo.data.alignment.links import read_links
from ordo.data.textio import atomic_write, read_lines, read_yaml
from ordo.errors import ConfigError, InputError
from ordo.evaluation.order import DifficultyBucket, alignment_tau, difficulty_buckets
from ordo.evaluation.seeds import (
    MAX_SEEDS,
    SeedComparison,
    SeedMetric,
    compare_seeds,
    pooled_bootstrap_p,
    ribes_metric,
    seeds_due,
)
from ordo.evaluation.seeds import bleu_metric as seed_bleu_metric
from recipes.compare import RECIPES, ROOT

FIRST_PASS = "first_pass"  # bench/results/hyps/CORPUS/first_pass: the runs before issue 40
FIRST_PASS_NOTE = "first pass (mixed commits and machines)"
NO_SET = "-"  # the set of a claim that has no runs anywhere yet
RETIRED = "RETIRED"  # a file in a set folder that stops the set: no verdict rows, no more runs (module docstring)
SERIES_MARK = "."  # SET.SERIES: the folder of a set of a pre-registered series (module docstring)
SHARED_DATA = ROOT.parent / "shared" / "data"  # the corpus folders of the suites that name no data_dir
BLEU, RIBES = "BLEU", "RIBES"  # the metrics of the tables (:func:`scored_metric`)


def _kept(function: Callable[..., float]) -> Callable[..., float]:
    """``function`` of lists of lines, each result kept by the lines it was given (equal lines, not the same
    list: every table reads the runs' files again)."""
    results: dict[tuple[tuple[str, ...], ...], float] = {}

    def kept(*texts: Sequence[str]) -> float:
        key = tuple(tuple(text) for text in texts)
        if key not in results:
            results[key] = function(*texts)
        return results[key]

    return kept


@functools.cache
def scored_metric(name: str, tokenized: bool) -> SeedMetric:
    """The :class:`ordo.evaluation.seeds.SeedMetric` ``name`` (:data:`BLEU` or :data:`RIBES` x100, on the tokens
    as given where ``tokenized``) whose scores and paired tests are each computed once per process: the tables
    score a run in several places (its comparisons, the table of runs, the thirds by reordering difficulty, the
    figures) and a comparison system in every claim against it."""
    metric = (seed_bleu_metric if name == BLEU else ribes_metric)(tokenized)
    return SeedMetric(metric.name, _kept(metric.score), _kept(metric.paired_p))


def read_claims() -> list[dict]:
    """The claims of recipes/verdicts.yaml, in order."""
    return yaml.safe_load((RECIPES / "verdicts.yaml").read_text(encoding="utf-8"))


def split_seed(name: str) -> tuple[str, int]:
    """``SYSTEM.seedN`` as (SYSTEM, N)."""
    match = re.fullmatch(r"(.+)\.seed(\d+)", name)
    if not match:
        sys.exit(f"{name}: expected SYSTEM.seedN, e.g. baseline.seed1")
    return match.group(1), int(match.group(2))


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
    return statistics.fmean(scored_metric(RIBES, tokenized).score(hyps, refs) for hyps in runs.values())


def set_folders(hyps_root: Path, corpus: str) -> list[Path]:
    """The set folders of ``corpus``'s runs (``hyps_root/CORPUS/SET``), in name order."""
    root = hyps_root / corpus
    return sorted(path for path in root.iterdir() if path.is_dir()) if root.is_dir() else []


def retired(folder: Path) -> bool:
    """Whether the set folder ``folder`` is retired (it holds a :data:`RETIRED` file: module docstring)."""
    return (folder / RETIRED).is_file()


def series_set(set_name: str, series: str | None) -> str:
    """The folder name of the set ``set_name`` in ``series`` (module docstring): ``SET.SERIES``; ``set_name``
    itself outside a series."""
    return f"{set_name}{SERIES_MARK}{series}" if series else set_name


def folder_series(folder: Path) -> str | None:
    """The series of the set folder ``folder`` (:func:`series_set`), None outside one."""
    return folder.name.partition(SERIES_MARK)[2] or None


def check_series(claims: list[dict], series: str | None) -> None:
    """Stop, naming the series the claims pre-register, at a ``series`` that no claim names (its runs would be
    judged by none)."""
    known = sorted({claim["series"] for claim in claims if claim.get("series")})
    if series is not None and series not in known:
        sys.exit(f"--series {series}: no claim pre-registers that series (recipes/verdicts.yaml's: "
                 f"{', '.join(known) or 'none'})")


def in_folder(claim: dict, folder: Path) -> bool:
    """Whether ``claim`` is judged on the runs in the set folder ``folder``: a claim marked ``first_pass`` on
    its corpus's first pass alone, a claim of a series (``series``) on that series' sets alone, any other claim on
    every other set of its corpus."""
    return (folder.parent.name == claim["corpus"] and (folder.name == FIRST_PASS) == bool(claim.get("first_pass"))
            and folder_series(folder) == claim.get("series"))


def claim_folders(claim: dict, hyps_root: Path) -> list[Path]:
    """The set folders ``claim`` gets a row for (:func:`in_folder`, not :func:`retired`, with runs of either of
    its systems); where there are none, the one folder its pending row names (``first_pass`` or :data:`NO_SET`)."""
    found = [folder for folder in set_folders(hyps_root, claim["corpus"])
             if in_folder(claim, folder) and not retired(folder)
             and any(any(folder.glob(f"{claim[side]}.seed*.txt")) for side in ("baseline", "system"))]
    return found or [hyps_root / claim["corpus"] / (FIRST_PASS if claim.get("first_pass") else NO_SET)]


def set_label(folder: Path) -> str:
    """The set cell of a table row: the set folder's name, :data:`FIRST_PASS_NOTE` for the first pass."""
    return FIRST_PASS_NOTE if folder.name == FIRST_PASS else folder.name


def run_settings(folder: Path, systems: Sequence[str]) -> list[dict]:
    """The settings of every run of ``systems`` in ``folder`` (their SYSTEM.seedN.yaml; {} where one lacks it)."""
    paths = [path.with_suffix(".yaml") for name in systems for path in sorted(folder.glob(f"{name}.seed*.txt"))]
    return [read_yaml(path) if path.exists() else {} for path in paths]


def exchange_values(settings: dict) -> dict[str, str]:
    """What a run's ``settings`` must share with the other runs of a comparison: its commit (7 digits), device
    (a GPU's name, or the CPU's model name, family and model number), CPU threads ("-" on a GPU, where they do
    not change the computation), precision and budget's name ("None" for what the settings lack: a suite that
    names no budgets records none)."""
    commit, device = str(settings.get("commit")), settings.get("device")
    cpu = settings.get("cpu") or {}
    on_gpu = device not in (None, "cpu")
    return {"commit": commit[:7] + ("+changes" if commit.endswith("+changes") else ""),
            "device": str(device) if device != "cpu" else
            f"{cpu.get('model')} family {cpu.get('family')} model {cpu.get('model_number')}",
            "threads": "-" if on_gpu else str(settings.get("threads")), "precision": str(settings.get("precision")),
            "budget": str((settings.get("budget") or {}).get("name"))}


def differences(runs: list[dict]) -> list[str]:
    """What the settings ``runs`` of one comparison differ in, each as ``FIELD (VALUE, VALUE)``: commit, device,
    threads, precision, budget (:func:`exchange_values`), and the prepared data (:func:`data_differences`)."""
    found = []
    for setting in ("commit", "device", "threads", "precision", "budget"):
        values = sorted({exchange_values(run)[setting] for run in runs})
        if len(values) > 1:
            found.append(f"{setting} ({', '.join(values)})")
    return found + data_differences(runs)


def data_differences(runs: list[dict]) -> list[str]:
    """What the data of ``runs`` differ in, among the runs trained on the data folder of one name (``data``: a
    system prepared by another config, e.g. a lattice, trains on other data by design): where every such run
    recorded ``data_hashes`` (recipes/replicate.py's ``data_hashes``), its tokens among them all and each
    per-token field among the runs that read it (a baseline does not read the alignments ExGRE learns from), as
    ``NAME hash of FOLDER (VALUE, VALUE)``; else the hash of all the folder's files (``data_hash``), as ``data
    hash of FOLDER (VALUE, VALUE)``."""
    found = []
    for name in dict.fromkeys(str(run.get("data")) for run in runs):
        group = [run for run in runs if str(run.get("data")) == name]
        if all(run.get("data_hashes") for run in group):
            hashes: dict[str, set[str]] = {}
            for run in group:
                for key, value in run["data_hashes"].items():
                    hashes.setdefault(key, set()).add(str(value)[:12])
            found += [f"{key} hash of {name} ({', '.join(sorted(values))})" for key, values in hashes.items()
                      if len(values) > 1]
        else:
            values = {str(run.get("data_hash"))[:12] for run in group}
            if len(values) > 1:
                found.append(f"data hash of {name} ({', '.join(sorted(values))})")
    return found


def suite_folder(corpus: str) -> Path:
    """The verdict suite (``recipes/*_verdict``) of ``corpus``."""
    for path in sorted(RECIPES.glob("*_verdict/suite.yaml")):
        if read_yaml(path)["corpus"] == corpus:
            return path.parent
    sys.exit(f"no recipes/*_verdict/suite.yaml for corpus {corpus}")


def suite_of(corpus: str) -> dict:
    """The suite.yaml of the verdict suite of ``corpus``."""
    return read_yaml(suite_folder(corpus) / "suite.yaml")


def run_spec(spec: dict, prepare_file: str) -> dict:
    """The suite.yaml ``spec`` as the runs of the data prepared by ``prepare_file`` read it: the source language of
    the files (``SPLIT.SRC.gz``) replaced by ``spec["sources"][prepare_file]`` where the suite names one (e.g.
    nist_verdict's lattice systems read the unsegmented Chinese, ``train.raw.zh.gz``, where its other systems read
    jieba's words, ``train.zh.gz``)."""
    source = (spec.get("sources") or {}).get(prepare_file)
    return {**spec, "src": source} if source else spec


def split_files(spec: dict, split: str) -> list[str]:
    """The corpus files of ``split`` (train, valid or test) of a suite (``spec`` its suite.yaml): the split's
    name with the source and target languages, e.g. ``test.de.gz``."""
    return [f"{spec['splits'][split]}.{spec[side]}.gz" for side in ("src", "tgt")]


def missing_files(folder: Path, spec: dict, splits: Sequence[str] = ("train", "valid", "test")) -> list[str]:
    """The corpus files of ``splits`` (:func:`split_files`) that ``folder`` lacks."""
    return [name for split in splits for name in split_files(spec, split) if not (folder / name).is_file()]


def stored_path(folder: Path) -> str:
    """``folder`` as a run's settings record it (``corpus_dir``): relative to the checkout (``../shared/data/...``
    for a corpus beside it), so that committed settings name no path of one machine."""
    return os.path.relpath(folder.resolve(), ROOT.resolve())


def recorded_corpus_folders(hyps_root: Path, corpus: str) -> list[Path]:
    """The corpus folders the recorded runs of ``corpus`` trained on (the ``corpus_dir`` of every
    ``hyps_root/CORPUS/SET/SYSTEM.seedN.yaml``, relative to the checkout), each once, in set and
    file name order."""
    settings = [read_yaml(path) or {} for path in sorted((hyps_root / corpus).glob("*/*.seed*.yaml"))]
    return list(dict.fromkeys(Path(os.path.normpath(ROOT / str(run["corpus_dir"])))
                              for run in settings if "corpus_dir" in run))


def default_corpus_folder(spec: dict, data_root: Path = SHARED_DATA) -> Path:
    """A suite's own corpus folder (``spec`` its suite.yaml): its ``data_dir``, relative to the checkout, where it
    names one (the paper-scale suites: where their corpus recipe writes the splits), else ``data_root/CORPUS``."""
    return ROOT / spec["data_dir"] if "data_dir" in spec else data_root / spec["corpus"]


@dataclass(frozen=True)
class CorpusFolders:
    """Where the tables look for each corpus's test references: the folder ``given`` for it (``replicate.py
    tables --data-dir CORPUS=DIR``), then the folders its recorded runs trained on (:func:`recorded_corpus_folders`),
    then its suite's own (:func:`default_corpus_folder` under ``data_root``)."""

    data_root: Path = SHARED_DATA
    given: Mapping[str, Path] = field(default_factory=dict)

    def candidates(self, spec: dict, hyps_root: Path) -> list[Path]:
        """The folders to look in for the corpus of the suite ``spec``, in order, each once."""
        corpus = spec["corpus"]
        given = [self.given[corpus]] if corpus in self.given else []
        return list(dict.fromkeys([*given, *recorded_corpus_folders(hyps_root, corpus),
                                   default_corpus_folder(spec, self.data_root)]))


def references(corpus: str, spec: dict, hyps_root: Path, corpora: CorpusFolders) -> list[str]:
    """The references of ``corpus``'s test split (``spec`` its suite.yaml) from the first folder of
    :meth:`CorpusFolders.candidates` that has them; stops, naming every folder looked in, where none has."""
    folders = corpora.candidates(spec, hyps_root)
    name = split_files(spec, "test")[1]
    for folder in folders:
        if (folder / name).is_file():
            return read_lines(folder / name)
    sys.exit(f"{corpus}: no test references {name} in {', '.join(map(str, folders))}: name the corpus folder with "
             f"`replicate.py tables --data-dir {corpus}=DIR`")


@dataclass
class Comparison:
    """A claim's two systems on its corpus in one set folder: their test hypotheses and BLEU by seed, and the
    references."""

    claim: dict
    refs: list[str]
    tokenized: bool
    base: dict[int, list[str]]
    system: dict[int, list[str]]
    base_bleu: dict[int, float]
    system_bleu: dict[int, float]
    folder: Path
    results: dict[tuple[str, bool], SeedComparison] = field(default_factory=dict, repr=False)  # result()'s, by metric

    @property
    def label(self) -> str:
        """``SYSTEM vs BASELINE (CORPUS, SET)``."""
        return f"{self.claim['system']} vs {self.claim['baseline']} ({self.claim['corpus']}, {self.folder.name})"

    @property
    def refusal(self) -> str:
        """Why the comparison is refused (:func:`differences` of its runs), "" when it is not or lies in the
        first pass."""
        if self.folder.name == FIRST_PASS:
            return ""
        found = differences(run_settings(self.folder, [self.claim["baseline"], self.claim["system"]]))
        return f"refused: runs differ in {'; '.join(found)}" if found else ""

    @property
    def common(self) -> list[int]:
        """The seeds both systems have."""
        return sorted(set(self.base) & set(self.system))

    @property
    def seeds_due(self) -> int:
        """The seeds a side the verdict is given at (module docstring): the claim's ``seeds`` (default 2), fixed
        before the runs, or more where the BLEU test of the first ``seeds`` seeds of each side (the lowest
        numbers) is inconclusive against its ``paper_gain`` (:func:`ordo.evaluation.seeds.seeds_due`)."""
        first = int(self.claim.get("seeds", 2))
        gain = self.claim.get("paper_gain")
        if gain is None or self.folder.name == FIRST_PASS:
            return first
        base, system = ([scores[seed] for seed in sorted(scores)] for scores in (self.base_bleu, self.system_bleu))
        return seeds_due(base, system, float(gain), first)

    @property
    def ready(self) -> bool:
        """Whether the verdict is due: :attr:`seeds_due` on both sides."""
        return min(len(self.base), len(self.system)) >= self.seeds_due

    @property
    def testable(self) -> bool:
        """Whether the test over seeds can run (:class:`ordo.evaluation.seeds.SeedTest`): a seed of each system
        and three in all."""
        return min(len(self.base), len(self.system)) >= 1 and len(self.base) + len(self.system) >= 3

    def result(self, metric: SeedMetric, against_paper: bool = True) -> SeedComparison:
        """The two systems' seeds compared in ``metric`` (:func:`ordo.evaluation.seeds.compare_seeds`), against
        the claim's ``paper_gain`` where ``against_paper`` (a BLEU gain: no yardstick for another metric), the
        seeds both have first so that the bootstrap over test sentences pools runs of the same seed; computed once
        per metric (the tables and the figures read the same result)."""
        key = (metric.name, against_paper)
        if key not in self.results:
            base_seeds, system_seeds = ([*self.common, *sorted(set(runs) - set(self.common))]
                                        for runs in (self.base, self.system))
            self.results[key] = compare_seeds([self.base[s] for s in base_seeds],
                                              [self.system[s] for s in system_seeds], self.refs, metric,
                                              self.claim.get("paper_gain") if against_paper else None)
        return self.results[key]


def compare(claim: dict, folder: Path, corpora: CorpusFolders) -> Comparison:
    """The committed hypotheses of ``claim``'s baseline and system in the set folder ``folder``, scored by
    seed against the references :func:`references` finds (none read where neither system has a seed)."""
    spec = suite_of(claim["corpus"])
    bleu = scored_metric(BLEU, bool(spec.get("tokenized"))).score
    base, system = seeds_of(folder, claim["baseline"]), seeds_of(folder, claim["system"])
    refs = references(claim["corpus"], spec, folder.parent.parent, corpora) if base or system else []
    return judged_seeds(Comparison(claim, refs, bool(spec.get("tokenized")), base, system,
                                   {seed: bleu(hyps, refs) for seed, hyps in base.items()},
                                   {seed: bleu(hyps, refs) for seed, hyps in system.items()}, folder))


def judged_seeds(comparison: Comparison) -> Comparison:
    """``comparison`` with each side cut to its lowest :attr:`Comparison.seeds_due` seed numbers: a system shared
    by several claims (the baseline) may have run extra seeds for one inconclusive claim, and those must not
    enter the verdict of another, judged at the seeds fixed for it. (Cutting keeps the first seeds, which alone
    set :attr:`Comparison.seeds_due`, so the cut comparison is due at the same count.) The first pass keeps
    every seed: its seed counts are what ran, fixed by no claim."""
    if comparison.folder.name == FIRST_PASS:
        return comparison
    due = comparison.seeds_due

    def first(runs: dict) -> dict:
        return {seed: runs[seed] for seed in sorted(runs)[:due]}

    return replace(comparison, base=first(comparison.base), system=first(comparison.system),
                   base_bleu=first(comparison.base_bleu), system_bleu=first(comparison.system_bleu), results={})


def comparisons_of(claims: list[dict], hyps_root: Path, corpora: CorpusFolders) -> list[Comparison]:
    """Every claim compared in each of its set folders (:func:`claim_folders`), in the claims' order."""
    return [compare(claim, folder, corpora) for claim in claims for folder in claim_folders(claim, hyps_root)]


def seed_p(base: dict[int, list[str]], system: dict[int, list[str]], refs: list[str],
           indices: Sequence[int] | None = None) -> float:
    """:func:`ordo.evaluation.seeds.pooled_bootstrap_p` of BLEU over the seeds ``base`` and ``system`` have in
    common."""
    common = sorted(set(base) & set(system))
    return pooled_bootstrap_p([base[s] for s in common], [system[s] for s in common], refs, indices,
                              scored_metric(BLEU, False).paired_p)


TEST_HEADER = ["gain [95% interval]", "p (t-test over seeds)", "min. detectable gain (80% power)",
               "seeds per side for the paper's gain", "bootstrap p (pooled seeds)"]


def test_cells(result: SeedComparison) -> list[str]:
    """The cells of :data:`TEST_HEADER` for ``result``."""
    test = result.test
    low, high = test.interval
    needed = result.seeds_needed
    needed_cell = "-" if result.target_gain is None else str(needed) if needed else f"> {MAX_SEEDS}"
    return [f"{test.mean_gain:+.2f} [{low:+.2f}, {high:+.2f}]", f"{test.p_value:.3g}",
            f"{test.min_detectable_gain():.2f}", needed_cell, f"{result.sentence_p:.3g}"]


def verdict_cells(comparison: Comparison, metric: SeedMetric, against_paper: bool = True) -> list[str]:
    """:func:`test_cells` and the verdict of ``comparison`` in ``metric`` (against the paper's gain where
    ``against_paper``): refused when its runs are not
    exchangeable (:attr:`Comparison.refusal`), pending until it is :attr:`Comparison.ready` (with the test
    so far where it can run), and the verdict word of the test over seeds once it is."""
    if comparison.refusal:
        return ["-"] * len(TEST_HEADER) + [comparison.refusal]
    pending = (f"pending ({len(comparison.base)} baseline, {len(comparison.system)} system seeds of "
               f"{comparison.seeds_due})")
    if not comparison.testable:
        return ["-"] * len(TEST_HEADER) + [pending]
    result = comparison.result(metric, against_paper)
    return [*test_cells(result), result.verdict if comparison.ready else pending]


HEADER = ["paper", "claim (paper's setting)", "corpus", "set", "comparison", "BLEU by seed (system)",
          "train min (system / base)", "RIBES (system / base)", *TEST_HEADER, "verdict"]


def claim_row(comparison: Comparison) -> list[str]:
    """One row of the verdicts table (:data:`HEADER`): the system's BLEU by seed, both systems' mean training
    minutes and RIBES, and the test over seeds in BLEU against the claim's ``paper_gain``
    (:func:`verdict_cells`)."""
    claim, base, system = comparison.claim, comparison.base, comparison.system
    listed = ", ".join(f"{comparison.system_bleu[s]:.2f}" for s in sorted(system)) or "-"
    minutes = [mean_minutes(comparison.folder, claim[side]) for side in ("system", "baseline")]
    ribes = [mean_ribes(runs, comparison.refs, comparison.tokenized) for runs in (system, base)]
    cells = [claim["paper"], claim["claim"], claim["corpus"], set_label(comparison.folder),
             f"{claim['system']} vs {claim['baseline']}", listed,
             " / ".join("-" if m is None else f"{m:.0f}" for m in minutes),
             " / ".join("-" if r is None else f"{r:.2f}" for r in ribes)]
    return [*cells, *verdict_cells(comparison, scored_metric(BLEU, comparison.tokenized))]


SUMMARY_HEADER = ["paper", "comparison", "paper's gain", "corpus", "set", "seeds (base / system)",
                  "BLEU gain [95% interval]", "RIBES gain [95% interval]", "verdict"]


def summary_row(comparison: Comparison) -> list[str]:
    """One row of the summary (:data:`SUMMARY_HEADER`): the claim's comparison and paper's gain, the seeds of each
    side, the mean BLEU and RIBES gains with their 95% intervals (:func:`test_cells`) and the BLEU verdict
    (:func:`verdict_cells`)."""
    claim = comparison.claim
    bleu = verdict_cells(comparison, scored_metric(BLEU, comparison.tokenized))
    ribes = (verdict_cells(comparison, scored_metric(RIBES, comparison.tokenized), against_paper=False)
             if comparison.testable and not comparison.refusal else ["-"])
    gain = claim.get("paper_gain")
    return [claim["paper"], f"{claim['system']} vs {claim['baseline']}", "-" if gain is None else f"{gain:+.2f}",
            claim["corpus"], set_label(comparison.folder), f"{len(comparison.base)} / {len(comparison.system)}",
            bleu[0], ribes[0], bleu[-1]]


RIBES_HEADER = ["paper", "comparison", "corpus", "set", "RIBES by seed (system)", *TEST_HEADER,
                "verdict on word order"]


def ribes_row(comparison: Comparison) -> list[str] | None:
    """The test over seeds on RIBES x100 (:func:`ordo.evaluation.seeds.ribes_metric`) for a comparison whose test
    can run and is not refused (None otherwise): each system seed's RIBES, :func:`test_cells` and the verdict,
    with no target gain (the papers claim BLEU gains only, so no RIBES gain is ruled out)."""
    if not comparison.testable or comparison.refusal:
        return None
    metric = scored_metric(RIBES, comparison.tokenized)
    claim = comparison.claim
    ribes = [metric.score(comparison.system[s], comparison.refs) for s in sorted(comparison.system)]
    return [claim["paper"], f"{claim['system']} vs {claim['baseline']}", claim["corpus"], set_label(comparison.folder),
            ", ".join(f"{score:.2f}" for score in ribes), *verdict_cells(comparison, metric, against_paper=False)]


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


RUNS_HEADER = ["corpus", "set", "system", "seed", "BLEU", "Δ BLEU, same seed of its comparison system", "RIBES",
               "dev loss at the end", "train min", "threads", "commit"]


def settings_cells(path: Path) -> list[str]:
    """The last dev loss, training minutes, threads and commit (7 digits, ``+`` for uncommitted changes) of a
    run's settings file, "-" for what it lacks (no file: all four)."""
    settings = read_yaml(path) if path.exists() else {}
    curve = settings.get("dev_loss") or {}
    commit = str(settings.get("commit", "-"))
    return [f"{curve[max(curve)]:.3f}" if curve else "-",
            f"{settings['train_minutes']:.1f}" if "train_minutes" in settings else "-",
            str(settings.get("threads", "-")), commit[:7] + ("+" if commit.endswith("+changes") else "")]


def folder_claims(claims: list[dict], folder: Path) -> list[dict]:
    """The claims judged on the runs of the set folder ``folder`` (:func:`in_folder`)."""
    return [claim for claim in claims if in_folder(claim, folder)]


def run_rows(corpus: str, claims: list[dict], hyps_root: Path, corpora: CorpusFolders) -> list[list[str]]:
    """One row per finished run of ``corpus``'s systems, a set folder at a time (the systems of the claims
    judged there, :func:`folder_claims`), comparison systems first: its BLEU, the difference to the same seed of
    the system it is compared with ("-" for a comparison system or a seed it lacks), RIBES x100, and from its
    settings file the dev loss at the end, training minutes, threads and commit."""
    folders = set_folders(hyps_root, corpus)
    if not any(any(folder.glob("*.seed*.txt")) for folder in folders):
        return []  # no runs: no references needed
    spec = suite_of(corpus)
    refs, tokenized = references(corpus, spec, hyps_root, corpora), bool(spec.get("tokenized"))
    bleu = scored_metric(BLEU, tokenized).score
    rows = []
    for folder in folders:
        scores: dict[str, dict[int, float]] = {}
        for system, against in compared_systems(folder_claims(claims, folder), corpus).items():
            runs = seeds_of(folder, system)
            scores[system] = {seed: bleu(hyps, refs) for seed, hyps in runs.items()}
            rows += [run_row(folder, system, seed, runs[seed], scores[system][seed],
                             scores.get(against or "", {}).get(seed), refs, tokenized) for seed in sorted(runs)]
    return rows


def run_row(folder: Path, system: str, seed: int, hyps: list[str], score: float, base: float | None,
            refs: list[str], tokenized: bool) -> list[str]:
    """The runs table's row of ``system``'s seed ``seed`` in the set folder ``folder``, its BLEU ``score`` and
    that of the same seed of its comparison system ``base`` (None: none)."""
    return [folder.parent.name, set_label(folder), system, str(seed), f"{score:.2f}",
            "-" if base is None else f"{score - base:+.2f}", f"{mean_ribes({seed: hyps}, refs, tokenized):.2f}",
            *settings_cells(folder / f"{system}.seed{seed}.yaml")]



def bucket_scores(runs: dict[int, list[str]], refs: list[str], buckets: list[DifficultyBucket],
                  tokenized: bool) -> dict[int, list[tuple[float, float]]]:
    """(BLEU, RIBES x100) of every bucket of test pairs, by seed."""
    bleu, ribes = (scored_metric(name, tokenized).score for name in (BLEU, RIBES))
    scores = {}
    for seed, hyps in runs.items():
        pairs = [([hyps[i] for i in b.indices], [refs[i] for i in b.indices]) for b in buckets]
        scores[seed] = [(bleu(*pair), ribes(*pair)) for pair in pairs]
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


ORDER_HEADER = ["corpus", "set", "system", "seeds", "BLEU: hardest τ third (Δ)", "BLEU: middle third (Δ)",
                "BLEU: most monotone third (Δ)", "RIBES: hardest third (Δ)", "RIBES: most monotone third (Δ)",
                "bootstrap p, hardest third"]


def bucket_p(base: dict[int, list[str]], system: dict[int, list[str]], refs: list[str], indices: list[int]) -> str:
    """:func:`seed_p` on the test pairs ``indices``, formatted ("-" without a common seed)."""
    if not set(base) & set(system):
        return "-"
    return f"{seed_p(base, system, refs, indices):.3g}"


def corpus_buckets(corpus: str, hyps_root: Path, corpora: CorpusFolders
                   ) -> tuple[dict, list[str], list[DifficultyBucket]] | None:
    """``corpus``'s suite.yaml, test references and thirds of the test pairs by alignment τ (from
    ``hyps_root/CORPUS/test.align``; None without that file)."""
    links = hyps_root / corpus / "test.align"
    if not links.exists():
        return None
    spec = suite_of(corpus)
    refs = references(corpus, spec, hyps_root, corpora)
    return spec, refs, difficulty_buckets(pair_taus(links, len(refs)))


def order_gains(corpus: str, folder: Path, claims: list[dict], hyps_root: Path, corpora: CorpusFolders
                ) -> tuple[list[str], dict[str, list[float]]]:
    """The τ range of each third of ``corpus``'s test pairs and, for every system of the claims judged in the set
    folder ``folder`` with seeds in common with its comparison system there, the mean BLEU difference per third
    over those seeds (nothing without ``hyps_root/CORPUS/test.align``)."""
    found = corpus_buckets(corpus, hyps_root, corpora)
    if found is None:
        return [], {}
    spec, refs, buckets = found
    series = {}
    for system, against in compared_systems(folder_claims(claims, folder), corpus).items():
        runs, base = seeds_of(folder, system), seeds_of(folder, against) if against else {}
        common = sorted(set(runs) & set(base))
        if not common:
            continue
        scores, base_scores = (bucket_scores({s: r[s] for s in common}, refs, buckets, bool(spec.get("tokenized")))
                               for r in (runs, base))
        series[f"{system} vs {against}"] = [statistics.fmean(scores[s][b][0] - base_scores[s][b][0] for s in common)
                                            for b in range(len(buckets))]
    return [b.label for b in buckets], series


def order_rows(corpus: str, claims: list[dict], hyps_root: Path, corpora: CorpusFolders) -> list[list[str]]:
    """The reordering-difficulty rows of ``corpus`` (none without ``hyps_root/CORPUS/test.align``): the τ range
    and size of each third of the test pairs, then for each set folder every system of the claims judged there
    that has seeds (:func:`folder_rows`)."""
    found = corpus_buckets(corpus, hyps_root, corpora)
    if found is None:
        return []
    buckets = found[2]
    columns: list[int | None] = [0, 1, len(buckets) - 1] if len(buckets) == 3 else [0, None, len(buckets) - 1]
    ranges = ["-" if b is None else f"{buckets[b].label} ({len(buckets[b].indices)} pairs)" for b in columns]
    rows = [[corpus, "-", "test pairs", "-", *ranges, ranges[0], ranges[2], "-"]]
    for folder in set_folders(hyps_root, corpus):
        rows += folder_rows(folder, folder_claims(claims, folder), found, columns)
    return rows


def folder_rows(folder: Path, claims: list[dict], found: tuple[dict, list[str], list[DifficultyBucket]],
                columns: list[int | None]) -> list[list[str]]:
    """The reordering-difficulty rows of the set folder ``folder`` (``found``: :func:`corpus_buckets`, ``columns``
    the buckets shown): every system of ``claims`` that has seeds there, each bucket's BLEU and RIBES averaged
    over seeds and, in brackets, the mean difference to its comparison system (the seed standard deviation for a
    comparison system), and the bootstrap p of that difference in the hardest third."""
    spec, refs, buckets = found
    scores, hyps, rows = {}, {}, []
    for system, against in compared_systems(claims, folder.parent.name).items():
        hyps[system] = seeds_of(folder, system)
        if not hyps[system]:
            continue
        scores[system] = bucket_scores(hyps[system], refs, buckets, bool(spec.get("tokenized")))
        base = scores.get(against, {}) if against else None  # {}: its comparison system has no seeds yet
        cells = [[("-" if b is None else bucket_cell(scores[system], base, b, metric)) for b in bucket_columns]
                 for metric, bucket_columns in ((0, columns), (1, [columns[0], columns[2]]))]
        p_value = bucket_p(hyps[against], hyps[system], refs, buckets[0].indices) if against else "-"
        rows.append([folder.parent.name, set_label(folder), system if against is None else f"{system} vs {against}",
                     str(len(hyps[system])), *cells[0], *cells[1], p_value])
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


def write_figures(comparisons: list[Comparison], hyps_root: Path, corpora: CorpusFolders, figures: Path
                  ) -> list[Path]:
    """``figures/verdicts_gains.png``: each testable, unrefused comparison's mean BLEU gain with its 95% interval
    and the paper's gain; ``figures/verdicts_dev_loss.png``: every comparison's two dev
    loss curves, each averaged over its seeds, so that a gap which closes with training shows;
    ``figures/verdicts_order_CORPUS_SET.png``: each system's BLEU difference per third of the test pairs by
    reordering difficulty in one set (:func:`order_gains`), where the corpus has its test links."""
    paths = []
    claims = [c.claim for c in comparisons]
    for corpus in dict.fromkeys(claim["corpus"] for claim in claims):
        for folder in set_folders(hyps_root, corpus):
            labels, series = order_gains(corpus, folder, claims, hyps_root, corpora)
            if series:
                paths.append(line_plot(labels, series, "alignment τ of the test pairs (left: most reordered)",
                                       "BLEU difference to the comparison system",
                                       figures / f"verdicts_order_{corpus}_{folder.name}.png",
                                       f"{corpus}, {folder.name}: gains by reordering difficulty (seed means)"))
    tested = [(c.label, c.result(scored_metric(BLEU, c.tokenized)), c.claim.get("paper_gain")) for c in comparisons
              if c.testable and not c.refusal]
    if tested:
        paths.append(gain_plot([(label, result.test.mean_gain, result.test.interval, paper_gain)
                                for label, result, paper_gain in tested],
                               "BLEU gain: mean (dot), 95% interval (bar), paper's gain (x)",
                               figures / "verdicts_gains.png", "Verdicts: gains over seeds"))
    panels = []
    for c in comparisons:
        curves = {c.claim[side]: mean_dev_loss(c.folder, c.claim[side]) for side in ("system", "baseline")}
        if all(curves.values()):
            panels.append((c.label, curves))
    if panels:
        paths.append(curve_panels(panels, "update", "dev loss", figures / "verdicts_dev_loss.png",
                                  x_from=DEV_CURVE_FROM))
    return paths


def write_tables(claims: list[dict], hyps_root: Path, corpora: CorpusFolders, out: Path, results: Path | None
                 ) -> None:
    """The verdicts table of every claim in each of its sets, its summary (the comparisons with runs on both
    sides), the table of every finished run, the verdicts on RIBES and the table by reordering difficulty, printed,
    written to ``out`` and beside it (``_summary``, ``_runs``, ``_ribes``, ``_order``), the summary's rows that have
    a verdict (neither pending nor refused) also put in place in ``results`` (None: nowhere else); the figures of
    :func:`write_figures` in ``figures/`` beside ``out``."""
    comparisons = comparisons_of(claims, hyps_root, corpora)
    summary_path = out.with_name(f"{out.stem}_summary.md")
    run_on_both = [comparison for comparison in comparisons if comparison.base and comparison.system]
    summary = [summary_row(comparison) for comparison in run_on_both]
    decided = [row for comparison, row in zip(run_on_both, summary) if comparison.ready and not comparison.refusal]
    tables = {summary_path: markdown_table(SUMMARY_HEADER, summary),
              out: markdown_table(HEADER, [claim_row(comparison) for comparison in comparisons])}
    names = dict.fromkeys(claim["corpus"] for claim in claims)
    runs = [row for corpus in names for row in run_rows(corpus, claims, hyps_root, corpora)]
    runs_path = out.with_name(f"{out.stem}_runs.md")
    tables[runs_path] = markdown_table(RUNS_HEADER, runs)
    ribes = [row for row in map(ribes_row, comparisons) if row is not None]
    if ribes:
        tables[out.with_name(f"{out.stem}_ribes.md")] = markdown_table(RIBES_HEADER, ribes)
    order = [row for corpus in names for row in order_rows(corpus, claims, hyps_root, corpora)]
    if order:
        tables[out.with_name(f"{out.stem}_order.md")] = markdown_table(ORDER_HEADER, order)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_figures(comparisons, hyps_root, corpora, out.parent / "figures")
    for path, table in tables.items():
        with atomic_write(path) as handle:
            handle.write(table)
        if results is not None and path == summary_path:
            document = replace_table(results.read_text(encoding="utf-8"), markdown_table(SUMMARY_HEADER, decided),
                                     results)
            with atomic_write(results) as handle:
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
