"""The verdict runs (issues 25 and 40): each system of a suite under several seeds, at the suite's fixed update
budget, with the small files anyone can rescore from committed under bench/results/hyps/CORPUS/SET/.

``run`` trains (or resumes) each ``SYSTEM.seedN`` of a suite (recipes/SUITE/systems.yaml's overrides plus
``train.seed=N``) to the suite's budget (:mod:`recipes.budgets`: ``--budget NAME`` of the budgets file suite.yaml
names, default ``paper``; a suite that names none, its suite.yaml's ``steps`` and ``average_last``): its updates,
batch and warm-up, then averages its last checkpoints, translates the test set with beam search, and writes
``bench/results/hyps/CORPUS/SET/SYSTEM.seedN.txt`` (one line per source line) and ``SYSTEM.seedN.yaml``
(overrides, updates, training minutes, parameters, checkpoints averaged, commit, device, CPU, threads,
precision, budget, the prepared data's hashes (:func:`data_hashes`), dev loss curve). SET names the exchangeable
set the run belongs to (:func:`budget_set`): the device (a GPU's name, or the CPU's model name, family and model number), the CPU
threads (not on a GPU), the precision and the budget where the suite names budgets, e.g.
``cpu-amd-epyc-25-1-t1-fp32``, ``gpu-nvidia-h200-bf16`` or ``gpu-nvidia-h100-bf16-paper``: runs of two budgets
never share a set. ``--series NAME`` records in ``SET.NAME`` instead, a new set for the claims that pre-register that
series (recipes/verdicts.py): e.g. 13 seeds a side of an inconclusive claim whose first set's alignments are gone.
A run starts only from a checkout whose ordo/ and recipes/ are committed (:func:`commit_id`) and whose own ordo
package the process runs (:func:`check_ordo_source`: as ``python recipes/replicate.py`` or ``python -m
recipes.replicate``, the checkout's root comes first on the path, in a git worktree too). ``--oracle
trains the suite's systems on the corpus whose every source sentence is put in target order by the prepared
data's word alignments (paper 000's Figure 2 upper bound), as ``oracle_SYSTEM``.

``tables`` rebuilds the verdicts tables and figures from those files alone (recipes/verdicts.py).

``prepare`` prepares a suite's data for each of its systems' prepare configs, as ``run`` would, without
training: bench/gpu/stage_verdicts.sh stages a GPU machine, which has no word aligner, with it. ``rehash`` adds
the hashes of what each run read (:func:`data_hashes`) to the records of a commit that wrote only ``data_hash``
(the staged tree's, a worktree's queue at an older commit), from their prepared data where it still is.

``pending`` lists the runs the claims still need in this machine's set of each suite (:func:`pending_runs`):
each claim's ``seeds`` of both its systems (more where the test of those is inconclusive and at most ten seeds a
side would detect the paper's gain: :attr:`recipes.verdicts.Comparison.seeds_due`), seed by seed across systems
(seed 1 of every system, comparison systems first, then seed 2, ...), leaving out the claims marked
``first_pass`` and the suites that need a GPU where there is none; ``--first SYSTEM`` puts the runs of the claims
on that system (and their comparison system's) before all others, to settle those claims soonest. ``queue`` works that list off, each time the next run no other process holds (``run``
takes the same lock), until every run is recorded or held by another process: two workers of one thread each,
started side by side, share the list. ``queue --start-within MINUTES`` starts no run after that many minutes (a
lent GPU's call ends at a fixed time, and a run it cuts off is lost: bench/gpu/verdicts.sh). Their ``--budget NAME`` applies to the suites that name budgets (the
paper-scale ones); the others train to their one schedule. Their ``--hyps DIR`` goes by the runs recorded there
(``queue`` records there too): e.g. a set whose runs train in a worktree at an older commit, whose own
``replicate.py`` predates a rule of this one's (then ``run`` there the runs ``pending --hyps`` lists here).

A suite's corpus folder is ``run --data-dir DIR`` where given, else the one its corpus's recorded runs trained
on, else the suite's own: suite.yaml's ``data_dir`` (relative to the checkout: the paper-scale suites, e.g.
wmt14_verdict's data/wmt14_ende, where recipes/wmt14_ende/run.sh --download writes it), or ../shared/data/CORPUS.
Each run records the folder in its settings (``corpus_dir``), and ``tables`` reads the test references from
there again (``tables --data-dir CORPUS=DIR`` names another). A folder that lacks one of the suite's splits
stops the run, naming the files. A suite that needs a GPU (``needs_gpu``) is refused on a CPU, but in a trial
(``--trial-steps N --trial-set KEY=VALUE ... --hyps DIR``: the whole pipeline at a tiny budget, for tests).

usage: python recipes/replicate.py run --suite enja_verdict [--data-dir DIR] [--work DIR] [--oracle]
           [--budget NAME] [--series NAME] [--hyps DIR [--trial-steps N] [--trial-set KEY=VALUE ...]] SYSTEM.seedN [...]
       python recipes/replicate.py prepare --suite SUITE [--data-dir DIR] [--work DIR]
       python recipes/replicate.py rehash --suite SUITE [--work DIR] [--hyps DIR]
       python recipes/replicate.py pending [--suite SUITE ...] [--threads N] [--budget NAME] [--series NAME]
           [--first SYSTEM ...]
       python recipes/replicate.py queue [--suite SUITE ...] [--threads N] [--budget NAME] [--series NAME] [--start-within MIN]
           [--first SYSTEM ...]
       python recipes/replicate.py tables [--out bench/results/verdicts.md] [--results bench/RESULTS.md]
           [--data-dir CORPUS=DIR ...]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm
import torch
import yaml

if not __package__:  # run as `python recipes/NAME.py`: the repository root, not recipes/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from ordo import api, gemm
from ordo.analysis.systems import training_figures
from ordo.build import count_parameters
from ordo.checkpoint import load_checkpoint
from ordo.cli import main as ordo
from ordo.config import build_config, merge, parse_overrides
from ordo.data.textio import atomic_write, read_lines, read_yaml
from ordo.device import resolve_device
from ordo.errors import ConfigError
from ordo.methods import METHODS
from ordo.precision import amp_dtype
from recipes.budgets import DEFAULT, Budget, folder_budget, has_budgets
from recipes.compare import RECIPES, ROOT, aliases, data_folder, folder_lock, prepare, system_entry, train
from recipes.verdicts import (
    RETIRED,
    SHARED_DATA,
    CorpusFolders,
    check_series,
    compare,
    default_corpus_folder,
    folder_series,
    missing_files,
    read_claims,
    recorded_corpus_folders,
    retired,
    run_spec,
    seeds_of,
    series_set,
    split_seed,
    stored_path,
    suite_folder,
    write_tables,
)

HYPS = ROOT / "bench" / "results" / "hyps"
VALID_LINE = re.compile(r"valid \| update (\d+) \| loss ([0-9.]+)")
# the files of a prepared data folder that define what a run trains on: its metadata, vocabularies, lattice
# segmenters and the training and validation token arrays (with their per-token fields, e.g. reorder positions)
DATA_FILES = ("data.yaml", "*.model", "lattice/*", "train.*.bin", "train.*.idx", "valid.*.bin", "valid.*.idx")
FIELD_FILE = re.compile(r"^(?:train|valid)\.field\.(.+)\.(?:bin|idx)$")  # a per-token field's file, by field name
PRECISIONS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
CPU_FLAGS = ("avx2", "avx512f", "amx_tile")
SERIES_HELP = ("the runs of the claims that pre-register this series (recipes/verdicts.yaml's series), in sets of "
               "their own, SET.SERIES (default: the sets outside any series)")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    run = verbs.add_parser("run", help="train, translate and record systems")
    run.add_argument("systems", nargs="+", metavar="SYSTEM.seedN", help="names from the suite's systems.yaml")
    staging = verbs.add_parser("prepare", help="prepare a suite's data for every system, without training")
    rehashing = verbs.add_parser("rehash", help="add data_hashes to recorded runs whose prepared data is here")
    rehashing.add_argument("--suite", required=True, help="folder of recipes/ with suite.yaml and the configs")
    rehashing.add_argument("--work", type=Path, help="where its data was prepared (default: work/SUITE)")
    rehashing.add_argument("--hyps", type=Path, default=HYPS, help="default: %(default)s")
    for verb in (run, staging):
        verb.add_argument("--suite", required=True, help="folder of recipes/ with suite.yaml and the configs")
        verb.add_argument("--data-dir", type=Path, help="corpus folder (default: the one the corpus's recorded runs "
                          "trained on, else the suite's: suite.yaml's data_dir, or ../shared/data/CORPUS)")
        verb.add_argument("--work", type=Path, help="default: work/SUITE")
    run.add_argument("--hyps", type=Path, help=f"where the runs record (default: {HYPS.relative_to(ROOT)})")
    run.add_argument("--trial-steps", type=int, help="for tests: train this many updates, not the suite's "
                     "(allowed on a CPU for a suite that needs a GPU; needs --hyps)")
    run.add_argument("--trial-set", action="append", default=[], metavar="KEY=VALUE",
                     help="for tests, with --trial-steps: an override of every run (e.g. a tiny model)")
    run.add_argument("--oracle", action="store_true", help="train on the target-order source corpus")
    run.add_argument("--threads", type=int, help="CPU threads per run (default: the suite's train.yaml); two queues "
                     "of one thread each train about 20%% more updates per hour on 2 cores than one of two")
    run.add_argument("--budget", help=f"a budget of the suite's budgets file (default: {DEFAULT}; recipes/budgets.py)")
    run.add_argument("--series", help=SERIES_HELP)
    for name, text in (("pending", "list the runs the verdicts still need in this machine's sets"),
                       ("queue", "run what the verdicts still need, beside other workers")):
        listing = verbs.add_parser(name, help=text)
        listing.add_argument("--suite", action="append", dest="suites", metavar="SUITE",
                             help="only this suite's runs (repeatable; default: every verdict suite)")
        listing.add_argument("--threads", type=int, help="CPU threads of each run (as for run)")
        listing.add_argument("--budget", help=f"the budget of the suites that name budgets (default: {DEFAULT})")
        listing.add_argument("--series", help=SERIES_HELP)
        listing.add_argument("--hyps", type=Path, help=f"the recorded runs to go by (default: {HYPS.relative_to(ROOT)})")
        listing.add_argument("--first", action="append", default=[], metavar="SYSTEM",
                             help="the runs of the claims on this system (and their comparison system's) before all "
                             "others, seed by seed (repeatable: e.g. --first exgre_soft --first refsr_soft)")
        if name == "queue":
            listing.add_argument("--start-within", type=float, metavar="MINUTES",
                                 help="start no run after this many minutes from the queue's start (default: no limit)")
    tables = verbs.add_parser("tables", help="rebuild the verdicts table from bench/results/hyps/")
    tables.add_argument("--hyps", type=Path, default=HYPS,
                        help="folder of CORPUS/SET/SYSTEM.seedN.txt (default: %(default)s)")
    tables.add_argument("--data-root", type=Path, default=SHARED_DATA,
                        help="folder of the corpus folders of the suites that name no data_dir (default: %(default)s)")
    tables.add_argument("--data-dir", action="append", default=[], metavar="CORPUS=DIR", type=corpus_dir_arg,
                        help="the corpus folder of CORPUS (default: the one its runs recorded, else its suite's)")
    tables.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "verdicts.md")
    tables.add_argument("--results", type=lambda value: Path(value) if value else None,
                        default=ROOT / "bench" / "RESULTS.md",
                        help="document whose tables are replaced too (default: %(default)s; '' for none)")
    return parser.parse_args()


def corpus_dir_arg(value: str) -> tuple[str, Path]:
    """A ``CORPUS=DIR`` argument as (CORPUS, DIR)."""
    corpus, sep, folder = value.partition("=")
    if not sep or not corpus or not folder:
        raise argparse.ArgumentTypeError(f"{value!r}: expected CORPUS=DIR, e.g. wmt14_ende=data/wmt14_ende")
    return corpus, Path(folder)


def git(*args: str) -> subprocess.CompletedProcess:
    """``git ARGS`` in the checkout, its output captured."""
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def commit_id() -> str:
    """The commit named by ``ORDO_COMMIT`` when set (a copy of the tree whose git metadata is not its own, as on a
    GPU machine, which receives the working tree with the session's first commit's .git), else the checkout's
    commit; stops, saying to commit first, when ordo/ or recipes/ differ from it (changed or untracked files)."""
    if "ORDO_COMMIT" in os.environ:
        return os.environ["ORDO_COMMIT"]
    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        sys.exit(f"{ROOT} is not a git checkout: name the commit it is a copy of in ORDO_COMMIT")
    changed = git("status", "--porcelain", "--", "ordo", "recipes").stdout.split("\n")
    if any(changed):
        sys.exit(f"{ROOT}: ordo/ or recipes/ differ from HEAD {head.stdout.strip()[:7]} "
                 f"({', '.join(line[3:] for line in changed if line)}): commit first, so that every run names the "
                 "code it trained")
    return head.stdout.strip()


def check_ordo_source() -> None:
    """Stop unless this process runs the checkout's own ordo package: an editable install of another checkout
    (e.g. the main one, beside a worktree) would train other code than the commit the run records."""
    source = Path(api.__file__).resolve().parents[1]
    if source != ROOT.resolve():
        sys.exit(f"this process imports ordo from {source}, not from {ROOT}: run it with PYTHONPATH={ROOT}")


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


def data_files(data: Path) -> list[Path]:
    """The files of the prepared data folder ``data`` that define what a run trains on (:data:`DATA_FILES`), in
    name order."""
    return sorted({path for pattern in DATA_FILES for path in data.glob(pattern) if path.is_file()})


def data_hash(data: Path) -> str:
    """SHA-256 over the names and bytes of :func:`data_files`: every byte, so two preparations differ in it where
    they differ in anything, even in what a run does not read (:func:`data_hashes`)."""
    digest = hashlib.sha256()
    for path in data_files(data):
        digest.update(f"{path.relative_to(data)}\n".encode())
        for block in file_blocks(path):
            digest.update(block)
    return digest.hexdigest()


def file_blocks(path: Path) -> Iterator[bytes]:
    """The bytes of ``path`` in blocks of 1 MiB."""
    with open(path, "rb") as handle:
        yield from iter(lambda: handle.read(1 << 20), b"")


def data_hashes(data: Path, fields: Sequence[str]) -> dict[str, str]:
    """What a run trained on, as SHA-256 hashes that two preparations of the same data agree on wherever the run
    reads the same thing: ``tokens`` over the names and contents of :func:`data_files` that are not a per-token
    field, and one hash per field of ``fields`` (those the run's methods read, :func:`fields_read`) over its files.
    A SentencePiece model counts by its pieces, scores and kinds, data.yaml without its byte digest of the models:
    a model's bytes name the folder it was trained in. A field stands apart because a run that does not read it
    does not depend on it, and the word alignments behind ``reorder_positions`` are drawn anew by every
    preparation (eflomal seeds its sampler from the system), where the tokens are made again byte for byte."""
    digests = {"tokens": hashlib.sha256(), **{name: hashlib.sha256() for name in fields}}
    for path in data_files(data):
        field = FIELD_FILE.match(path.name)
        digest = digests.get(field.group(1)) if field else digests["tokens"]
        if digest is not None:
            digest.update(f"{path.relative_to(data)}\n".encode())
            for block in content_blocks(path):
                digest.update(block)
    return {name: digest.hexdigest() for name, digest in digests.items()}


def content_blocks(path: Path) -> Iterator[bytes]:
    """What ``path`` holds for :func:`data_hashes`: a SentencePiece model's pieces with their scores and kinds,
    data.yaml without ``vocab_sha256``, any other file's bytes (read in blocks)."""
    if path.suffix == ".model":
        model = spm.SentencePieceProcessor(model_file=str(path))
        yield "\n".join(f"{model.id_to_piece(i)}\t{model.get_score(i)}\t{model.is_control(i)}{model.is_unknown(i)}"
                        f"{model.is_unused(i)}{model.is_byte(i)}" for i in range(model.get_piece_size())).encode()
    elif path.name == "data.yaml":
        meta = {key: value for key, value in read_yaml(path).items() if key != "vocab_sha256"}
        yield yaml.safe_dump(meta, sort_keys=True).encode()
    else:
        yield from file_blocks(path)


def rehash(suite: str, work: Path, hyps_root: Path) -> list[Path]:
    """Add ``data_hashes`` (:func:`data_hashes`, the fields those of the methods the record's own overrides switch
    on) to the recorded runs of ``suite``'s corpus that lack them and whose ``data_hash`` is that of the prepared
    folder of their ``data`` in ``work``: runs of a commit before ``data_hashes`` (a staged GPU tree's, a
    worktree's queue at an older commit) whose data is still there. The records changed."""
    full: dict[Path, str] = {}
    changed = []
    for path in sorted((hyps_root / read_yaml(RECIPES / suite / "suite.yaml")["corpus"]).glob("*/*.seed*.yaml")):
        settings = read_yaml(path)
        data = work / str(settings.get("data"))
        if "data_hashes" in settings or not data.is_dir():
            continue
        if data not in full:
            full[data] = data_hash(data)
        if settings.get("data_hash") != full[data]:
            continue
        overrides = [*(settings.get("trial") or {}).get("overrides", []), *settings.get("overrides", [])]
        hashes = data_hashes(data, fields_read(RECIPES / suite, overrides))
        updated = {}
        for key, value in settings.items():
            updated[key] = value
            if key == "data_hash":
                updated["data_hashes"] = hashes
        with atomic_write(path) as handle:
            yaml.safe_dump(updated, handle, sort_keys=False)
        changed.append(path)
    return changed


def fields_read(suite: Path, overrides: list[str]) -> tuple[str, ...]:
    """The per-token fields of the prepared data that a run of ``suite`` with ``overrides`` reads: those its
    methods declare (:class:`ordo.methods.Method`), every method its config switches on (a ``model.methods``
    key, with options or none), in name order."""
    config = build_config(merge(read_yaml(suite / "train.yaml"), parse_overrides(overrides)))
    return tuple(sorted({field for name in config.model.methods for field in METHODS[name].fields}))


def cpu_settings() -> dict[str, str | bool]:
    """The CPU of this machine (/proc/cpuinfo's first processor): model name, family, model number and whether it
    has the AVX2, AVX-512F and AMX tile instructions."""
    info = gemm.cpuinfo()
    flags = set(info.get("flags", "").split())
    return {"model": info.get("model name", "unknown"), "family": info.get("cpu family", ""),
            "model_number": info.get("model", ""), **{flag: flag in flags for flag in CPU_FLAGS}}


def training_device(train_config: dict) -> dict[str, str]:
    """The device this process trains on under ``train_config`` (a run's ``train`` settings; ``auto``: CUDA when
    there is a GPU) and the autocast precision of its ``train.amp`` there: a GPU's name with ``bfloat16`` for the
    default ``auto``, ``cpu`` with ``float32`` on a CPU."""
    device = resolve_device(train_config.get("device", "auto"))
    dtype = amp_dtype(train_config.get("amp", "auto"), device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"device": name, "precision": str(dtype or torch.float32).removeprefix("torch.")}


def train_settings(suite: Path, overrides: list[str], threads: int | None) -> dict:
    """The ``train`` settings a run of ``suite`` with ``overrides`` (and ``threads``, when given) trains under."""
    extra = [f"train.threads={threads}"] if threads else []
    return merge(read_yaml(suite / "train.yaml"), parse_overrides([*extra, *overrides])).get("train", {})


def machine_settings(train_config: dict) -> dict:
    """What makes runs under ``train_config`` on this machine exchangeable: CPU threads, device, precision, the
    CPU (:func:`cpu_settings`) and the CPU matrix multiply backend ``train.cpu_gemm`` resolves to."""
    return {"threads": int(train_config.get("threads") or torch.get_num_threads()), **training_device(train_config),
            "cpu": cpu_settings(), "cpu_gemm": gemm.resolve(train_config.get("cpu_gemm", "auto"))}


def slug(text: str) -> str:
    """``text`` in lower case with every run of other characters than letters and digits as one ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def set_name(machine: dict) -> str:
    """The exchangeable set of runs with ``machine``'s settings (:func:`machine_settings`): ``gpu-NAME-PRECISION``
    on a GPU, ``cpu-MODEL-FAMILY-MODELNUMBER-tTHREADS-PRECISION`` on a CPU (trademarks, clock and core count left
    out of the model name)."""
    precision = PRECISIONS.get(machine["precision"], machine["precision"])
    if machine["device"] != "cpu":
        return slug(f"gpu {machine['device']} {precision}")
    cpu = machine["cpu"]
    model = re.sub(r"\((r|tm)\)|@.*|\bcpu\b|\bprocessor\b|\d+-core", " ", cpu["model"].lower())
    return slug(f"cpu {model} {cpu['family']} {cpu['model_number']} t{machine['threads']} {precision}")


def budget_set(machine: dict, budget: Budget) -> str:
    """The exchangeable set of runs with ``machine``'s settings at ``budget``: :func:`set_name`, followed by the
    budget's name where the suite names budgets (``gpu-nvidia-h100-bf16-paper``), so that the runs of two budgets
    never share a folder."""
    return f"{set_name(machine)}-{slug(budget.name)}" if budget.name else set_name(machine)


def record(run_dir: Path, settings: dict, sources: list[str], hyps_path: Path, settings_path: Path) -> None:
    """Translate ``sources`` with the averaged checkpoint; write the hypotheses and the settings (``settings``,
    fixed before training, with the run's updates, minutes, parameters, checkpoints averaged and dev loss curve)
    atomically."""
    run = api.load_run(run_dir, "averaged")
    hyps = run.translate(sources)
    figures = training_figures(run_dir)
    written = {
        **{key: settings[key] for key in ("system", "seed", "overrides")}, "updates": figures.updates,
        "train_minutes": round(figures.minutes, 1), "parameters": count_parameters(run.model),
        "averaged": load_checkpoint(run_dir / "checkpoints" / "averaged.pt")["averaged"],
        **{key: value for key, value in settings.items() if key not in ("system", "seed", "overrides")},
        "dev_loss": dev_loss_curve(run_dir),
    }
    hyps_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(hyps_path) as handle:
        handle.write("".join(f"{hyp}\n" for hyp in hyps))
    with atomic_write(settings_path) as handle:
        yaml.safe_dump(written, handle, sort_keys=False)
    print(f"== {settings['system']} seed {settings['seed']}: {hyps_path}", flush=True)


@dataclass(frozen=True)
class Trial:
    """A test of a suite's whole pipeline at a tiny budget: ``steps`` updates instead of the suite's, and
    ``overrides`` over every run's settings (e.g. a tiny model on the CPU). Its runs record the trial in their
    settings, and may train a suite that needs a GPU on a CPU."""

    steps: int
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class SuiteRuns:
    """Where the runs of a suite (a folder of recipes/ with suite.yaml and the configs) train: its corpus folder
    (None: :func:`corpus_folder` finds it), work folder (None: work/SUITE), whether on the target-order source
    corpus (``oracle``), the CPU threads of each run (None: the suite's train.yaml), the folder the runs record
    in (None: :data:`HYPS`), for tests only a :class:`Trial`, the budget (None: the suite's default,
    :func:`recipes.budgets.folder_budget`) and the series of the claims they are for (None: none;
    :func:`recipes.verdicts.series_set`)."""

    suite: str
    data_dir: Path | None = None
    work: Path | None = None
    oracle: bool = False
    threads: int | None = None
    hyps: Path | None = None
    trial: Trial | None = None
    budget: str | None = None
    series: str | None = None

    @property
    def hyps_root(self) -> Path:
        """The folder of CORPUS/SET/SYSTEM.seedN files the runs record in."""
        return self.hyps or HYPS

    @property
    def extra_overrides(self) -> list[str]:
        """The trial's overrides of every run (none outside a trial)."""
        return list(self.trial.overrides) if self.trial else []


@dataclass(frozen=True)
class PlannedRun:
    """A ``SYSTEM.seedN`` of a suite as it will run on this machine: its overrides, prepare config, settings
    fixed before training (commit, :func:`machine_settings` and budget), budget, exchangeable set and run
    folder."""

    name: str
    seed: int
    recorded: str
    prepare_file: str
    overrides: list[str]
    settings: dict
    budget: Budget
    set: str
    run_dir: Path


def plan_run(runs: SuiteRuns, label: str) -> PlannedRun:
    """How ``label`` of ``runs.suite`` runs here, at the budget ``runs.budget`` names; stops for an unknown
    system, an uncommitted checkout, or a suite that needs a GPU (suite.yaml's ``needs_gpu``) on a machine that
    trains on its CPU, outside a :class:`Trial`. Its run folder, ``WORK/runs/SET/COMMIT/SYSTEM.seedN``, is never
    resumed on another set (another budget: :func:`budget_set`) or at another commit.

    Raises:
        ConfigError: the suite has no budget ``runs.budget`` (naming its budgets file), or names no budgets and
            ``runs.budget`` is given.
    """
    suite = RECIPES / runs.suite
    systems = read_yaml(suite / "systems.yaml")
    name, seed = split_seed(label)
    if name not in systems:
        sys.exit(f"unknown system {name}; {suite / 'systems.yaml'} has {sorted(systems)}")
    budget = folder_budget(suite, runs.budget)
    check_ordo_source()
    commit = commit_id()
    prepare_file, overrides = system_entry(name, systems[name])
    overrides = [*overrides, f"train.seed={seed}"]
    machine = machine_settings(train_settings(suite, [*runs.extra_overrides, *overrides], runs.threads))
    if read_yaml(suite / "suite.yaml").get("needs_gpu") and machine["device"] == "cpu" and runs.trial is None:
        sys.exit(f"{runs.suite} needs a GPU (its suite.yaml's needs_gpu) and this machine trains on its CPU")
    work = (runs.work or ROOT / "work" / runs.suite) / ("oracle" if runs.oracle else "")
    recorded = f"oracle_{name}" if runs.oracle else name  # beside the corpus's other systems
    settings = {"system": recorded, "seed": seed, "overrides": overrides, "commit": commit, **machine}
    if budget.name:
        settings["budget"] = budget.settings
    if runs.trial:
        settings["trial"] = {"steps": runs.trial.steps, "overrides": list(runs.trial.overrides)}
    run_set = series_set(budget_set(machine, budget), runs.series)
    return PlannedRun(name, seed, recorded, prepare_file, overrides, settings, budget, run_set,
                      work / "runs" / run_set / commit[:12] / label)


def corpus_folder(runs: SuiteRuns, spec: dict) -> Path:
    """The corpus folder the runs of ``runs.suite`` (``spec`` its suite.yaml) train on: ``runs.data_dir`` where
    given, else the first existing folder the corpus's recorded runs trained on
    (:func:`recipes.verdicts.recorded_corpus_folders`), else the suite's own
    (:func:`recipes.verdicts.default_corpus_folder`); stops, naming the files, when it lacks one of the suite's
    splits."""
    recorded = [folder for folder in recorded_corpus_folders(runs.hyps_root, spec["corpus"]) if folder.is_dir()]
    folder = runs.data_dir or (recorded[0] if recorded else default_corpus_folder(spec))
    missing = missing_files(folder, spec)
    if missing:
        sys.exit(f"{folder}: no {', '.join(missing)} (the {runs.suite} suite's splits "
                 f"{', '.join(f'{split}: {name}' for split, name in spec['splits'].items())}, {spec['src']} -> "
                 f"{spec['tgt']}): give its corpus folder with --data-dir DIR")
    return folder


def prepared_data(runs: SuiteRuns, spec: dict, prepare_file: str, data_dir: Path) -> tuple[Path, Path]:
    """(folder of the corpus files, prepared data folder) of a run of ``runs.suite`` with ``prepare_file`` on the
    corpus in ``data_dir``, prepared once (``runs.oracle``: the target-order source corpus, from the suite's
    aligned data)."""
    suite = RECIPES / runs.suite
    work = runs.work or ROOT / "work" / runs.suite
    if runs.oracle:
        prepare(suite / "prepare.yaml", spec, data_dir, data_folder(work, "prepare.yaml"))
        data_dir = oracle_corpus(data_folder(work, "prepare.yaml"), spec, work / "oracle_corpus")
        work = work / "oracle"
    data = data_folder(work, prepare_file)
    prepare(suite / prepare_file, spec, data_dir, data)
    return data_dir, data


def run_system(runs: SuiteRuns, label: str) -> bool:
    """Train and record one ``SYSTEM.seedN`` of ``runs.suite`` (``runs.oracle``: on the target-order source
    corpus) in its set's folder, under a lock beside its run folder, its settings naming the corpus folder it
    trained on (``corpus_dir``, where the tables find the references again); its source files are those of its
    prepare config (:func:`recipes.verdicts.run_spec`). False, doing nothing, when another process holds the
    lock."""
    plan = plan_run(runs, label)
    spec = run_spec(read_yaml(RECIPES / runs.suite / "suite.yaml"), plan.prepare_file)
    with folder_lock(plan.run_dir, wait=False) as held:
        if not held:
            print(f"== {label}: another process is running it", flush=True)
            return False
        corpus_records = runs.hyps_root / spec["corpus"]
        hyps_path, settings_path = record_paths(corpus_records / plan.set, f"{plan.recorded}.seed{plan.seed}")
        if hyps_path.exists():
            print(f"== {label}: recorded already ({hyps_path})", flush=True)
            return True
        corpus = corpus_folder(runs, spec)
        data_dir, data = prepared_data(runs, spec, plan.prepare_file, corpus)
        if not runs.oracle:
            keep_test_links(data, corpus_records)
        fields = fields_read(RECIPES / runs.suite, [*runs.extra_overrides, *plan.overrides])
        settings = {**plan.settings, "data": data.name, "data_hash": data_hash(data),
                    "data_hashes": data_hashes(data, fields), "corpus_dir": stored_path(corpus)}
        clash = preparation_clash(corpus_records / plan.set, settings)
        if clash:
            print(f"== {label}: not run: {clash}", flush=True)
            return False
        steps = runs.trial.steps if runs.trial else plan.budget.steps
        train(RECIPES / runs.suite, label, plan.overrides, data, plan.run_dir, steps, runs.threads,
              [*plan.budget.schedule_overrides, *runs.extra_overrides], plan.budget.average_last)
        sources = read_lines(data_dir / f"{spec['splits']['test']}.{spec['src']}.gz")
        record(plan.run_dir, settings, sources, hyps_path, settings_path)
    return True


def preparation_clash(folder: Path, settings: dict) -> str:
    """Why a run with ``settings`` (its ``data`` folder's name and ``data_hashes``) may not join the set ``folder``:
    what it reads hashes to a value that no recorded run on a data folder of that name, reading the same, has
    (``tables`` would refuse their comparisons); "" when nothing does. A new machine prepares the data again, and
    eflomal draws other alignments than the ones the set's ExGRE or ReFSR runs learnt from, where the tokens come
    out byte for byte the same: the set's baseline can go on there, its alignment-reading systems cannot."""
    runs = [run for run in map(read_yaml, sorted(folder.glob("*.seed*.yaml"))) if str(run.get("data")) == settings["data"]]
    found = []
    for key, value in settings["data_hashes"].items():
        recorded = {str(run["data_hashes"][key]) for run in runs if key in (run.get("data_hashes") or {})}
        if recorded and value not in recorded:
            found.append(f"{key} of {settings['data']} hashes to {value[:12]} here, to "
                         f"{', '.join(sorted(known[:12] for known in recorded))} in its recorded runs")
    if not found:
        return ""
    return (f"{'; '.join(found)} (eflomal draws its alignments anew at every preparation): recorded in {folder}, "
            "it would make the set's comparisons refuse; run it where the set's preparation is, or retire the set")


def prepare_suite(runs: SuiteRuns) -> list[Path]:
    """Prepare, as its runs would and once each, the data of every prepare config ``runs.suite``'s systems name
    (systems.yaml), without training, on any machine: to stage a machine that cannot prepare them (a lent GPU
    machine has no word aligner), whose runs then find them prepared. The prepared folders, in the order of their
    configs' names."""
    suite = RECIPES / runs.suite
    systems, suite_spec = read_yaml(suite / "systems.yaml"), read_yaml(suite / "suite.yaml")
    other_names = aliases(systems)
    prepared = []
    for prepare_file in sorted({system_entry(name, entry)[0] for name, entry in systems.items()
                                if name not in other_names}):
        spec = run_spec(suite_spec, prepare_file)
        prepared.append(prepared_data(runs, spec, prepare_file, corpus_folder(runs, spec))[1])
    return prepared


def run_systems(runs: SuiteRuns, labels: list[str]) -> None:
    """Train and record each ``SYSTEM.seedN`` of ``labels``, in order (:func:`run_system`)."""
    for label in labels:
        run_system(runs, label)


@dataclass(frozen=True)
class PendingRun:
    """A ``SYSTEM.seedN`` that a verdict needs and bench/results/hyps/CORPUS/SET does not have yet."""

    corpus: str
    set: str
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


def seeds_wanted(claims: list[dict], sets: dict[str, str], hyps_root: Path | None = None,
                 corpora: CorpusFolders | None = None) -> dict[tuple[str, str], int]:
    """(corpus, system) -> the seeds the claims on the corpora of ``sets`` want of it: each claim's ``seeds``
    (default 2) of its system and of its comparison system (two at least, for its seed spread), or, given the
    committed runs under ``hyps_root``, the seeds its verdict is due at in its set (:func:`seeds_due`); the claims
    marked ``first_pass`` want none, and a claim of a series (:func:`recipes.verdicts.folder_series`) wants
    seeds only in a set of its series, as the others only outside one."""
    wanted: dict[tuple[str, str], int] = {}
    for claim in claims:
        if (claim.get("first_pass") or claim["corpus"] not in sets
                or claim.get("series") != folder_series(Path(sets[claim["corpus"]]))):
            continue
        count = int(claim.get("seeds", 2))
        if hyps_root is not None:
            count = seeds_due(claim, hyps_root / claim["corpus"] / sets[claim["corpus"]], corpora or CorpusFolders())
        for name, seeds in ((claim["baseline"], max(count, 2)), (claim["system"], count)):
            wanted[claim["corpus"], name] = max(wanted.get((claim["corpus"], name), 0), seeds)
    return wanted


def seeds_due(claim: dict, folder: Path, corpora: CorpusFolders) -> int:
    """The seeds a side ``claim``'s verdict is due at in the set ``folder``
    (:attr:`recipes.verdicts.Comparison.seeds_due`): its ``seeds``, or more where the test of those is
    inconclusive; its runs are scored only once both systems have that many."""
    count = int(claim.get("seeds", 2))
    if min(len(seeds_of(folder, claim[side])) for side in ("baseline", "system")) < count:
        return count
    return compare(claim, folder, corpora).seeds_due


def pending_runs(claims: list[dict], hyps_root: Path, sets: dict[str, str],
                 references: CorpusFolders | None = None, first: tuple[str, ...] = ()) -> list[PendingRun]:
    """The runs ``claims`` still need (:func:`seeds_wanted` from the runs under ``hyps_root``, their references
    found by ``references``) in the set ``sets[CORPUS]`` (the claims of a corpus that ``sets`` lacks are left
    out), seed by seed: seed 1 of every system, then seed 2, and so on; within one seed a corpus at a time in the
    claims' order, comparison systems (e.g. ``baseline``, ``rnnsearch``) first, then the systems in the order the
    claims name them. The runs of the claims whose system ``first`` names (theirs and their comparison systems')
    come before all others, in that order among themselves: the claims a user wants settled soonest."""
    corpora = list(dict.fromkeys(claim["corpus"] for claim in claims))
    compared = {(claim["corpus"], claim["baseline"]) for claim in claims}
    hurried = {(claim["corpus"], claim[side]) for claim in claims if claim["system"] in first
               for side in ("baseline", "system")}
    wanted = seeds_wanted(claims, sets, hyps_root, references)
    named = list(wanted)
    runs = [PendingRun(corpus, sets[corpus], name, seed) for (corpus, name), count in wanted.items()
            for seed in range(1, count + 1) if seed not in seeds_of(hyps_root / corpus / sets[corpus], name)]
    return sorted(runs, key=lambda run: ((run.corpus, run.system) not in hurried, run.seed, corpora.index(run.corpus),
                                         (run.corpus, run.system) not in compared, named.index((run.corpus, run.system))))


def check_first(claims: list[dict], first: list[str]) -> None:
    """Stop, naming it, at a system of ``--first`` that no claim is on (it would change nothing)."""
    systems = sorted({claim["system"] for claim in claims})
    for name in first:
        if name not in systems:
            sys.exit(f"--first {name}: no claim is on that system (the claims' systems: {', '.join(systems)})")


def queue_budget(suite: str, budget: str | None) -> str | None:
    """The budget ``pending`` and ``queue`` give the runs of ``suite``: ``budget`` where the suite names budgets,
    None (its one schedule) where it does not."""
    return budget if has_budgets(RECIPES / suite) else None


def machine_set(suite: str, threads: int | None, budget: str | None = None) -> str | None:
    """This machine's set (:func:`budget_set`) for the runs of ``suite`` with ``threads`` at ``budget`` (None:
    the suite's default); None where the suite needs a GPU (suite.yaml's ``needs_gpu``) and this machine trains
    on its CPU."""
    machine = machine_settings(train_settings(RECIPES / suite, [], threads))
    if read_yaml(RECIPES / suite / "suite.yaml").get("needs_gpu") and machine["device"] == "cpu":
        return None
    return budget_set(machine, folder_budget(RECIPES / suite, budget))


def selected_runs(claims: list[dict], suites: list[str] | None, threads: int | None,
                  budget: str | None = None, hyps: Path | None = None, first: tuple[str, ...] = (),
                  series: str | None = None) -> list[PendingRun]:
    """:func:`pending_runs` of the hypotheses under ``hyps`` (None: :data:`HYPS`) in this machine's sets
    (:func:`machine_set`) for runs of ``threads`` CPU threads at ``budget`` (:func:`queue_budget`), of the claims
    on the corpora of ``suites`` only where given, the claims of the systems ``first`` names first, in the sets of
    ``series`` (:func:`recipes.verdicts.series_set`); a retired set (:func:`recipes.verdicts.retired`) needs no
    runs, and says why."""
    hyps = hyps or HYPS
    sets = {}
    for corpus in dict.fromkeys(claim["corpus"] for claim in claims):
        suite = suite_folder(corpus).name
        found = machine_set(suite, threads, queue_budget(suite, budget)) if not suites or suite in suites else None
        found = found and series_set(found, series)
        if found and retired(hyps / corpus / found):
            reason = (hyps / corpus / found / RETIRED).read_text(encoding="utf-8").strip()
            print(f"== {corpus}/{found} is retired, no runs for it: {reason}", flush=True)
        elif found:
            sets[corpus] = found
    return pending_runs(claims, hyps, sets, first=first)


def work_queue(claims: list[dict], suites: list[str] | None, threads: int | None, budget: str | None = None,
               start_within: float | None = None, hyps: Path | None = None, first: tuple[str, ...] = (),
               series: str | None = None) -> None:
    """Run the first pending run (:func:`selected_runs` of the runs recorded under ``hyps``, where it records
    too) that no other process holds (:func:`run_system`), and go on until every pending run is recorded or held
    by another process (or was run by this one: a run that recorded elsewhere than :func:`selected_runs` looks is
    not run twice), or until ``start_within`` minutes have passed since the call (None: no limit), after which no
    run starts; the claims of the systems ``first`` names first (:func:`pending_runs`), in the sets of ``series``."""
    check_ordo_source()  # another checkout's ordo, or an uncommitted checkout, stops here, before any run
    commit_id()
    deadline = None if start_within is None else time.monotonic() + 60 * start_within
    done: set[str] = set()
    while True:
        if deadline is not None and time.monotonic() >= deadline:
            print(f"== queue: {start_within:g} minutes have passed: no run starts now", flush=True)
            return
        for run in selected_runs(claims, suites, threads, budget, hyps, first, series):
            if str(run) in done:
                continue
            print(f"== queue: {run} ({run.corpus}/{run.set})", flush=True)
            runs = SuiteRuns(run.suite, oracle=run.oracle, threads=threads, hyps=hyps,
                             budget=queue_budget(run.suite, budget), series=series)
            if run_system(runs, run.label):
                done.add(str(run))
                break
        else:
            print("== queue: nothing left that another process is not running", flush=True)
            return


def suite_runs(args: argparse.Namespace) -> SuiteRuns:
    """The runs ``run``'s arguments ask for; stops where a trial's options come without their own --hyps folder
    (a trial never records beside the verdicts' runs)."""
    trial = Trial(args.trial_steps, tuple(args.trial_set)) if args.trial_steps else None
    if (trial or args.trial_set) and (not args.trial_steps or args.hyps is None or args.hyps.resolve() == HYPS):
        sys.exit("--trial-steps N (and --trial-set) need their own --hyps DIR: a trial never records in "
                 f"{HYPS.relative_to(ROOT)}")
    return SuiteRuns(args.suite, args.data_dir, args.work, args.oracle, args.threads, args.hyps, trial, args.budget,
                     args.series)


def main() -> None:
    args = parse_args()
    claims = read_claims()
    check_series(claims, getattr(args, "series", None))
    try:
        if args.verb == "run":
            run_systems(suite_runs(args), args.systems)
        elif args.verb == "prepare":
            for data in prepare_suite(SuiteRuns(args.suite, args.data_dir, args.work)):
                print(data, flush=True)
        elif args.verb == "rehash":
            for path in rehash(args.suite, args.work or ROOT / "work" / args.suite, args.hyps):
                print(path, flush=True)
        elif args.verb == "pending":
            check_first(claims, args.first)
            hyps = args.hyps or HYPS
            shown = hyps.relative_to(ROOT) if hyps.is_relative_to(ROOT) else hyps
            print("".join(f"{run}\t{shown / run.corpus / run.set}\n"
                          for run in selected_runs(claims, args.suites, args.threads, args.budget, hyps,
                                                   tuple(args.first), args.series)), end="")
        elif args.verb == "queue":
            check_first(claims, args.first)
            work_queue(claims, args.suites, args.threads, args.budget, args.start_within, args.hyps, tuple(args.first),
                       args.series)
        else:
            write_tables(claims, args.hyps, CorpusFolders(args.data_root, dict(args.data_dir)), args.out,
                         args.results)
    except ConfigError as error:  # e.g. an unknown budget, named with its file
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
