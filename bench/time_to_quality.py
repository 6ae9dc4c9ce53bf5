"""Time to quality: a run's test BLEU had it stopped at each of its checkpoints, against its training minutes.

For every periodic checkpoint ``step_S.pt`` whose S is a multiple of ``--every``, the last ``--average``
checkpoints up to S are averaged (what the recipe's averaging would have given, had training stopped at S), the
test set is translated with the run's decode settings, and sacreBLEU is computed; the minutes are the
checkpoint's own ``train_seconds`` (training time over all resumptions, validation excluded). The table says
the first point at or above ``--target`` (e.g. a peer's final score). Peers' points (``--peer NAME=TSV`` with
``minutes<TAB>BLEU`` lines, e.g. fairseq's epoch checkpoints) are drawn in the same plot.

The run must keep enough checkpoints (``train.keep_last`` large) for the points asked for.

usage: python bench/time_to_quality.py --run RUN --src TEST.src --ref TEST.ref [--every 250] [--average 5]
           [--target 37.27] [--amp off|bf16] [--peer fairseq=FILE.tsv] [--label NAME]
           [--out bench/results/time_to_quality.md]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

from ordo import api
from ordo.analysis.tables import markdown_table
from ordo.checkpoint import (
    STEP_PATTERN,
    average_checkpoints,
    load_checkpoint,
    save_checkpoint,
    step_checkpoints,
)
from ordo.data.textio import atomic_write, read_lines
from ordo.evaluation.bleu import corpus_scores


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a trained ordo run")
    parser.add_argument("--src", type=Path, required=True, help="test source text")
    parser.add_argument("--ref", type=Path, required=True, help="test reference text")
    parser.add_argument("--every", type=int, default=250, help="evaluate checkpoints whose update is a multiple")
    parser.add_argument("--average", type=int, default=5, help="checkpoints averaged at each point")
    parser.add_argument("--target", type=float, help="BLEU to reach (a peer's final score)")
    parser.add_argument("--amp", default="off", help="decode.amp for the translations (off, bf16)")
    parser.add_argument("--peer", action="append", default=[], metavar="NAME=TSV", help="minutes<TAB>BLEU points")
    parser.add_argument("--label", help="the run's name in the plot (default: its directory's)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/time_to_quality.md"))
    return parser.parse_args()


def step_of(path: Path) -> int:
    """The update number of a ``step_N.pt`` checkpoint (as :func:`step_checkpoints` lists them)."""
    return int(STEP_PATTERN.match(path.name).group(1))  # type: ignore[union-attr]


def evaluation_points(checkpoints: list[Path], every: int, average: int) -> list[tuple[int, list[Path]]]:
    """(S, the last ``average`` checkpoints up to S) for each checkpoint S that is a multiple of ``every`` and
    has ``average`` checkpoints at or before it."""
    points = []
    for index, path in enumerate(checkpoints):
        step = step_of(path)
        if step % every == 0 and index + 1 >= average:
            points.append((step, checkpoints[index + 1 - average:index + 1]))
    return points


def score_point(run: Path, paths: list[Path], sources: list[str], refs: list[str], amp: str) -> float:
    """Test BLEU of the average of ``paths``, translated with ``run``'s decode settings."""
    with tempfile.TemporaryDirectory() as tmp:
        averaged = Path(tmp) / "averaged.pt"
        save_checkpoint({"model": average_checkpoints(paths)}, averaged)
        loaded = api.load_run(run, checkpoint=str(averaged))
        hyps = loaded.translate(sources, amp=amp)
    return float(corpus_scores(hyps, refs)["bleu"])


def read_peer(spec: str) -> tuple[str, list[tuple[float, float]]]:
    """``NAME=TSV`` as (NAME, [(minutes, BLEU), ...])."""
    name, _, path = spec.partition("=")
    rows = [line.split("\t") for line in read_lines(Path(path)) if line.strip()]
    return name, [(float(row[0]), float(row[1])) for row in rows]


def plot(series: dict[str, list[tuple[float, float]]], target: float | None, path: Path) -> None:
    """Test BLEU against training minutes, one line per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for name, points in series.items():
        axes.plot([m for m, _ in points], [b for _, b in points], marker="o", label=name)
    if target is not None:
        axes.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:.2f}")
    axes.set_xlabel("training minutes")
    axes.set_ylabel("test BLEU")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> None:
    args = parse_args()
    sources, refs = read_lines(args.src), read_lines(args.ref)
    points = evaluation_points(step_checkpoints(args.run / "checkpoints"), args.every, args.average)
    if not points:
        sys.exit(f"{args.run}: no checkpoint at a multiple of {args.every} with {args.average} before it")
    rows, ours = [], []
    for step, paths in points:
        minutes = load_checkpoint(paths[-1])["progress"]["train_seconds"] / 60
        bleu = score_point(args.run, paths, sources, refs, args.amp)
        ours.append((minutes, bleu))
        rows.append([str(step), f"{minutes:.1f}", f"{bleu:.2f}", f"{step_of(paths[0])}-{step}"])
        print(f"update {step}: {minutes:.1f} min, BLEU {bleu:.2f}", flush=True)
    reached = next((row for row, (_, bleu) in zip(rows, ours) if args.target is not None and bleu >= args.target), None)
    series = {args.label or args.run.name: ours, **dict(read_peer(spec) for spec in args.peer)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure = args.out.parent / "figures" / f"{args.out.stem}.png"
    figure.parent.mkdir(exist_ok=True)
    plot(series, args.target, figure)
    text = [f"command: `python {shlex.join(sys.argv)}`", "",
            markdown_table(["update", "training minutes", "test BLEU", "checkpoints averaged"], rows)]
    if args.target is not None:
        text.append(f"target {args.target:.2f}: " + (f"first reached at update {reached[0]}, {reached[1]} minutes"
                                                       if reached else "not reached"))
    text.append(f"plot: figures/{figure.name}")
    with atomic_write(args.out) as handle:
        handle.write("\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
