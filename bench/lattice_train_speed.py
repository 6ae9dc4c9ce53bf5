"""Training speed of a suite's systems on its real prepared data, against the first system, in one process.

methods_speed.py times lattice attention on synthetic batches of one length; this benchmark times what a recipe
run does: each system's own batches of the real corpus (its ``train.yaml`` batching, e.g. ``target_bucket``),
the forward and backward passes, the auxiliary losses and the Adam step, with the recipe's model. The systems
take turns in interleaved rounds of ``--updates`` updates each, so drift on the machine affects all of them
alike; each round's target tokens per second are recorded and the median over rounds is reported, with its
ratio to the first system's.

The data folders are the ones ``recipes/compare.py`` prepared under ``--work`` (run the recipe, or at least its
prepare step, first). Nothing is written under ``--work``.

``--pack-below 0,0.9`` times every system twice, with the encoder's sublayers (the FFN; the self-attention's
projections, residual and layer norm) on padded positions (0) and on the real tokens alone (0.9, the default;
``ordo.models.transformer.PACK_BELOW``, set on each system's model as ``TransformerEncoder.pack_below``),
interleaved.

usage: python bench/lattice_train_speed.py --suite zhen_lattice --work work/zhenlattice
           [--systems onebest_jieba,lattice,lattice_lsa,lattice_lpe_lsa] [--rounds 5] [--updates 20]
           [--pack-below 0,0.9] [--set KEY=VALUE ...] [--out bench/results/lattice_train_speed.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

if not __package__:  # run as `python bench/NAME.py`: the repository root, not bench/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.methods_speed import write_report
from ordo.api import build_for_data
from ordo.config import build_config, merge, parse_overrides
from ordo.data.corpus import DataMeta
from ordo.data.textio import read_yaml
from ordo.models.transformer import PACK_BELOW, TransformerEncoder
from ordo.training.trainer import Trainer
from recipes import compare


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", required=True, help="folder of recipes/ with train.yaml and systems.yaml")
    parser.add_argument("--work", type=Path, required=True, help="the recipe's work folder (prepared data)")
    parser.add_argument("--systems", default="onebest_jieba,lattice,lattice_lsa,lattice_lpe_lsa",
                        help="comma-separated names from systems.yaml; the first is the reference")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--updates", type=int, default=20, help="updates per system per round")
    parser.add_argument("--set", dest="common", action="append", default=[], metavar="KEY=VALUE",
                        help="override for every system (e.g. model.d_model=128)")
    parser.add_argument("--pack-below", default=str(PACK_BELOW),
                        help="comma-separated TransformerEncoder.pack_below values; each system runs with each")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent / "results" / "lattice_train_speed.md")
    return parser.parse_args()


def make_trainer(suite: Path, work: Path, name: str, entry: object, common: list[str], scratch: Path,
                 pack_below: float) -> Trainer:
    """A fresh trainer for one system, configured as ``recipes/compare.py`` would train it, whose encoder packs
    the real tokens under ``pack_below`` of the source positions."""
    prepare_file, overrides = compare.system_entry(name, entry)
    data = compare.data_folder(work, prepare_file)
    if not (data / "data.yaml").exists():
        sys.exit(f"{name}: {data} is not prepared; run recipes/compare.py for suite {suite.name} first")
    raw = merge(read_yaml(suite / "train.yaml"), parse_overrides([f"data={data}", *common, *overrides]))
    cfg = build_config(raw, str(suite / "train.yaml"))
    torch.manual_seed(cfg.train.seed)
    built = build_for_data(cfg, DataMeta.load(data))
    for module in built.model.modules():
        if isinstance(module, TransformerEncoder):
            module.pack_below = pack_below
    return Trainer(built.model, cfg, scratch / name, built.losses, built.fields)


def timed_round(trainer: Trainer, updates, count: int) -> float:
    """Target tokens per second over ``count`` full updates."""
    stats: dict[str, float] = defaultdict(float)
    start = time.perf_counter()
    for _ in range(count):
        trainer.train_step(next(updates), stats)
    return stats["tokens"] / (time.perf_counter() - start)


def main() -> None:
    args = parse_args()
    suite = compare.RECIPES / args.suite
    entries = read_yaml(suite / "systems.yaml")
    names = args.systems.split(",")
    unknown = [name for name in names if name not in entries]
    if unknown:
        sys.exit(f"unknown systems {unknown}; {suite / 'systems.yaml'} has {sorted(entries)}")
    pack_values = [float(value) for value in args.pack_below.split(",")]
    runs = [(name, pack) for pack in pack_values for name in names]  # the first is the reference
    label = {run: run[0] if len(pack_values) == 1 else f"{run[0]} (pack below {run[1]:g})" for run in runs}
    with tempfile.TemporaryDirectory() as scratch:
        trainers = {run: make_trainer(suite, args.work, run[0], entries[run[0]], args.common,
                                      Path(scratch) / f"{run[0]}_{run[1]}", run[1]) for run in runs}
        torch.set_num_threads(trainers[runs[0]].tcfg.threads)
        streams = {run: trainer.updates() for run, trainer in trainers.items()}
        speeds: dict[tuple[str, float], list[float]] = {run: [] for run in runs}
        for repeat in range(args.rounds + 1):  # the first round (2 updates) warms up allocator and first calls
            for run in runs:
                speed = timed_round(trainers[run], streams[run], args.updates if repeat else 2)
                if repeat:
                    speeds[run].append(speed)
    medians = {run: statistics.median(values) for run, values in speeds.items()}
    reference = medians[runs[0]]
    command = "python bench/lattice_train_speed.py " + " ".join(sys.argv[1:])
    lines = [f"command: `{command}`",
             (f"torch {torch.__version__}, {torch.get_num_threads()} threads; medians of {args.rounds} interleaved "
              f"rounds of {args.updates} updates on each system's own batches of the prepared corpus"), "",
             f"| system | train tgt tok/s | vs {label[runs[0]]} | rounds (tgt tok/s) |", "|---|---:|---:|---|"]
    for run in runs:
        rounds = ", ".join(f"{value:.0f}" for value in speeds[run])
        lines.append(f"| {label[run]} | {medians[run]:.0f} | {medians[run] / reference:.3f} | {rounds} |")
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
