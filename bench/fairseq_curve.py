"""fairseq's time-to-quality curve: test BLEU of its epoch checkpoints against its training minutes (issue 28).

Reads a finished run of ``../shared/bench/peer_multi30k.sh`` (its ``WORK`` directory: ``train.log``,
``checkpoints/checkpoint<N>.pt``, ``data-bin/``, ``raw/``) and, for every epoch N saved as ``checkpoint<N>.pt``
(the epoch that ``--stop-time-hours`` cuts is saved only as ``checkpoint_last.pt`` and left out), averages the last
``--average`` epoch checkpoints up to N (fewer for the first epochs), as the script's stage 4 does for its final
score, translates test2016 with ``fairseq-generate`` at the script's settings (beam 5, length penalty 1.0, batch
128, SentencePiece removed) and scores it with sacreBLEU against the raw references. The minutes are fairseq's own
``train_wall`` summed over epochs 1..N: training only, validation and checkpoint saving excluded, as
``bench/time_to_quality.py`` counts ordo's ``train_seconds``. The output TSV (``minutes<TAB>BLEU``) is what
``bench/time_to_quality.py --peer 'fairseq=TSV'`` draws beside ordo's curve; the markdown table beside it gives
each point's epoch, updates, wall minutes and the checkpoints averaged.

Averaging and translation run in the fairseq venv (``--venv``, default ``WORK/venv``). fairseq 0.12 checkpoints
hold omegaconf objects, which ``torch.load(weights_only=True)`` refuses, so that process sets
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` as the peer script does; nothing of fairseq's is loaded in ordo's process.

usage: python bench/fairseq_curve.py --work WORK [--venv VENV] [--average 5] [--subset test --ref raw/test2016.de]
           [--out bench/results/fairseq_m30k_curve.md]
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as `python bench/NAME.py`: the repository root, not bench/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.fairseq_real import fairseq_env
from ordo.analysis.tables import markdown_table
from ordo.data.textio import atomic_write, read_lines
from ordo.evaluation.bleu import corpus_scores

EPOCH_LINE = re.compile(r"\| train \| epoch (\d+) \|(.*)$")
FIELD = re.compile(r"(\w+) ([-+.\deE]+)")
HYPOTHESIS = re.compile(r"^H-(\d+)\t[^\t]*\t(.*)$")

AVERAGE_CHECKPOINTS = """
import sys, torch
out, paths = sys.argv[1], sys.argv[2:]
state, total = None, {}
for path in paths:
    loaded = torch.load(path, map_location="cpu")
    state = state or loaded
    for name, value in loaded["model"].items():
        value = value.float()
        total[name] = total[name] + value if name in total else value.clone()
state["model"] = {name: value / len(paths) for name, value in total.items()}
torch.save(state, out)
"""


@dataclass(frozen=True)
class Epoch:
    """One complete epoch of a fairseq run, from its ``| train | epoch N |`` summary line."""

    number: int
    updates: int
    train_seconds: float  # this epoch's train_wall
    wall_seconds: float  # the run's wall clock at the end of the epoch


def read_epochs(train_log: Path) -> list[Epoch]:
    """The complete epochs of ``train_log`` (fairseq's ``--log-format simple`` output), in order."""
    epochs = []
    for line in read_lines(train_log):
        match = EPOCH_LINE.search(line)
        if match:
            fields = dict(FIELD.findall(match.group(2)))
            epochs.append(Epoch(int(match.group(1)), int(float(fields["num_updates"])),
                                float(fields["train_wall"]), float(fields["wall"])))
    if not epochs:
        raise ValueError(f"{train_log}: no '| train | epoch N |' line (a fairseq-train log in the simple format?)")
    return epochs


def run_peer(command: list[str]) -> str:
    """Run ``command`` in the fairseq venv's environment; its stdout, or an error with its stderr's tail."""
    env = fairseq_env(2) | {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} exited with {done.returncode}:\n{done.stderr[-2000:]}")
    return done.stdout


def hypotheses(generate_output: str) -> list[str]:
    """``fairseq-generate``'s detokenized hypotheses (``H-<id>\\t<score>\\t<text>``) in the test set's order."""
    numbered = {}
    for line in generate_output.splitlines():
        match = HYPOTHESIS.match(line)
        if match:
            numbered[int(match.group(1))] = match.group(2)
    return [numbered[index] for index in sorted(numbered)]


def epoch_bleu(work: Path, venv: Path, checkpoints: list[Path], subset: str, refs: list[str]) -> float:
    """Test BLEU of the average of ``checkpoints`` translated by ``fairseq-generate`` as the peer script does."""
    with tempfile.TemporaryDirectory() as tmp:
        averaged = Path(tmp) / "averaged.pt"
        run_peer([str(venv / "bin" / "python"), "-c", AVERAGE_CHECKPOINTS, str(averaged), *map(str, checkpoints)])
        output = run_peer([str(venv / "bin" / "fairseq-generate"), str(work / "data-bin"), "--source-lang", "en",
                           "--target-lang", "de", "--path", str(averaged), "--gen-subset", subset, "--beam", "5",
                           "--lenpen", "1.0", "--batch-size", "128", "--remove-bpe", "sentencepiece", "--cpu"])
    hyps = hypotheses(output)
    if len(hyps) != len(refs):
        raise RuntimeError(f"fairseq-generate gave {len(hyps)} hypotheses for {len(refs)} references")
    return float(corpus_scores(hyps, refs)["bleu"])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="the peer script's WORK directory, trained")
    parser.add_argument("--venv", type=Path, help="the fairseq venv (default WORK/venv)")
    parser.add_argument("--average", type=int, default=5, help="epoch checkpoints averaged at each point")
    parser.add_argument("--subset", default="test", help="fairseq's name of the test split (test = test2016)")
    parser.add_argument("--ref", type=Path, help="references (default WORK/raw/test2016.de)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/fairseq_m30k_curve.md"))
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    venv = args.venv or args.work / "venv"
    refs = read_lines(args.ref or args.work / "raw" / "test2016.de")
    checkpoints = args.work / "checkpoints"
    # the epoch cut by --stop-time-hours is logged but saved only as checkpoint_last.pt, which the score skips
    epochs = [e for e in read_epochs(args.work / "train.log") if (checkpoints / f"checkpoint{e.number}.pt").exists()]
    rows, points, train_seconds = [], [], 0.0
    for index, epoch in enumerate(epochs):
        train_seconds += epoch.train_seconds
        averaged = epochs[max(0, index + 1 - args.average):index + 1]
        paths = [checkpoints / f"checkpoint{e.number}.pt" for e in averaged]
        bleu = epoch_bleu(args.work, venv, paths, args.subset, refs)
        points.append(f"{train_seconds / 60:.2f}\t{bleu:.2f}")
        rows.append([str(epoch.number), str(epoch.updates), f"{train_seconds / 60:.1f}",
                     f"{epoch.wall_seconds / 60:.1f}", f"{bleu:.2f}", f"{averaged[0].number}-{epoch.number}"])
        print(f"epoch {epoch.number}: {train_seconds / 60:.1f} min, BLEU {bleu:.2f}", file=sys.stderr, flush=True)
    tsv = args.out.with_suffix(".tsv")
    with atomic_write(tsv) as handle:
        handle.write("\n".join(points) + "\n")
    text = [f"command: `python {shlex.join(sys.argv)}`", "",
            markdown_table(["epoch", "updates", "training minutes", "wall minutes", "test BLEU",
                            "epochs averaged"], rows),
            f"points for bench/time_to_quality.py --peer: {tsv.name}"]
    with atomic_write(args.out) as handle:
        handle.write("\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
