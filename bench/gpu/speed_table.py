"""The speed table of bench/gpu/check.sh: ordo eager, ordo compiled and fairseq on the same GPU, from their logs.

Reads ``OUT/{shape}_{fairseq,eager,compiled,graphs}.log`` for the shapes ``base`` and ``small`` (graphs: compiled
with CUDA graphs; a missing log is a ``-``); each figure is the
median of the logged intervals after the first (warm-up, and compilation for the compiled step): ordo's
``tgt tok/s``, fairseq's ``wps`` (target tokens per second, on the same pieces and batch size). MFU counts the
model FLOPs of bench/gpu/flops.py against the rated bf16 peak; peak memory is ordo's largest logged figure.

usage: python bench/gpu/speed_table.py OUT --data base=DIR --data small=DIR
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

if not __package__:  # run as `python bench/gpu/NAME.py`: the repository root, not bench/gpu/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.gpu.flops import RATED_BF16_TFLOPS, flops_per_target_token
from ordo import api
from ordo.config import load_config
from ordo.data.corpus import DataMeta

SHAPES = {"base": ["model.preset=base", "model.dropout=0.1", "train.max_tokens=25000"], "small": []}
RECIPE = Path("recipes/multi30k/train.yaml")


def intervals(log: Path, pattern: str) -> list[float]:
    """Every number the regular expression ``pattern`` captures in ``log`` (commas dropped); empty if no log."""
    if not log.exists():
        return []
    return [float(m.group(1).replace(",", "")) for m in re.finditer(pattern, log.read_text(errors="replace"))]


def steady(values: list[float]) -> float | None:
    """Median of ``values`` after the first (warm-up); None when fewer than two."""
    return statistics.median(values[1:]) if len(values) > 1 else None


def mfu(tokens: float | None, per_token: float) -> str:
    """Model FLOP utilisation of ``tokens`` target tokens/s at ``per_token`` FLOPs each, in percent."""
    return "-" if tokens is None else f"{100 * tokens * per_token / 1e12 / RATED_BF16_TFLOPS:.1f}%"


def ratio(a: float | None, b: float | None) -> str:
    """a / b as ``1.23x``; ``-`` where either is missing."""
    return "-" if a is None or not b else f"{a / b:.2f}x"


def count(x: float | None) -> str:
    """``x`` with thousands separators; ``-`` where missing."""
    return "-" if x is None else f"{x:,.0f}"


MODES = ("eager", "compiled", "graphs")
HEADER = ("| shape | fairseq --fp16 tok/s | ordo eager / compiled / graphs tok/s | best / fairseq | best / eager "
          "| MFU eager / compiled / graphs | peak MB eager / compiled / graphs |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--data", action="append", default=[], metavar="SHAPE=DIR")
    args = parser.parse_args()
    data = dict(item.split("=", 1) for item in args.data)
    rows = [HEADER, "|---|" + "---:|" * 6]
    for shape, sets in SHAPES.items():
        fairseq = steady(intervals(args.out / f"{shape}_fairseq.log", r"\bwps=([\d.,]+)"))
        speeds = [steady(intervals(args.out / f"{shape}_{mode}.log", r"tgt tok/s ([\d.,]+)")) for mode in MODES]
        peaks = [max(intervals(args.out / f"{shape}_{mode}.log", r"peak mem ([\d.,]+) MB"), default=0.0)
                 for mode in MODES]
        best = max((x for x in speeds if x is not None), default=None)
        cfg = load_config(RECIPE, [*sets, f"data={data[shape]}"])
        meta = DataMeta.load(Path(data[shape]))
        per_token = flops_per_target_token(api.build_for_data(cfg, meta).model, cfg, meta, Path(data[shape]))
        rows.append(f"| {shape} (vocab {meta.tgt_vocab_size:,}) | {count(fairseq)} | {' / '.join(map(count, speeds))} "
                    f"| {ratio(best, fairseq)} | {ratio(best, speeds[0])} "
                    f"| {' / '.join(mfu(x, per_token) for x in speeds)} | {' / '.join(f'{p:,.0f}' for p in peaks)} |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
