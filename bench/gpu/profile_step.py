"""Where a training step's time goes on a GPU: ordo's real trainer on real batches, under torch.profiler.

For each ``--compile`` mode, the trainer of ``CONFIG`` (with ``--set`` overrides) runs ``--warmup`` updates (the
compiled graph is built there) and then ``--steps`` profiled updates. Per mode it reports the host's wall time
per update, the GPU's busy time per update (kernels and copies), the kernels launched per update, the model
FLOP utilisation against the rated bf16 peak, and the kernels that take the most GPU time. A host time well
above the GPU time means the step is bound by launching kernels from Python, not by the GPU.

usage: python bench/gpu/profile_step.py recipes/multi30k/train.yaml --data DIR --set model.preset=base
           --set train.max_tokens=25000 [--compile off default] [--out profile.md]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

if not __package__:  # run as `python bench/gpu/NAME.py`: the repository root, not bench/gpu/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.gpu.flops import RATED_BF16_TFLOPS, flops_per_target_token
from ordo import api
from ordo.config import load_config
from ordo.data.corpus import DataMeta
from ordo.training.trainer import Trainer


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--compile", nargs="+", default=["off", "default"])
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args()


def profile_mode(args: argparse.Namespace, mode: str) -> list[str]:
    """Markdown lines for one compile mode."""
    sets = [*args.sets, f"data={args.data}", f"train.compile={mode}", "train.progress=false"]
    cfg = load_config(args.config, sets)
    meta = DataMeta.load(args.data)
    torch.manual_seed(cfg.train.seed)
    built = api.build_for_data(cfg, meta)
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = Trainer(built.model, cfg, Path(run_dir), built.losses, built.fields)
        updates = trainer.updates()
        stats: dict = defaultdict(float)  # the trainer's running figures, as Trainer.train keeps them
        started = time.perf_counter()
        for _ in range(args.warmup):
            trainer.train_step(next(updates), stats)
        torch.cuda.synchronize()
        warm_seconds = time.perf_counter() - started
        tokens_before = trainer.progress.tgt_tokens
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            started = time.perf_counter()
            for _ in range(args.steps):
                trainer.train_step(next(updates), stats)
            torch.cuda.synchronize()
            seconds = time.perf_counter() - started
        tokens = trainer.progress.tgt_tokens - tokens_before
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    gpu_us = sum(e.device_time for e in kernels)  # summed kernel times; overlapping streams count twice
    per_token = flops_per_target_token(built.model, cfg, meta, args.data)
    tflops = tokens / seconds * per_token / 1e12
    lines = [
        f"### train.compile: {mode}",
        "",
        f"{args.warmup} warm-up updates in {warm_seconds:.1f} s (compilation included); {args.steps} profiled updates:",
        "",
        "| figure | value |",
        "|---|---:|",
        f"| host wall ms per update | {1000 * seconds / args.steps:.1f} |",
        f"| GPU kernel ms per update | {gpu_us / 1000 / args.steps:.1f} |",
        f"| kernels per update | {len(kernels) / args.steps:.0f} |",
        f"| target tokens per second | {tokens / seconds:,.0f} |",
        f"| model TFLOP/s (MFU against {RATED_BF16_TFLOPS:.0f}) | {tflops:.1f} ({100 * tflops / RATED_BF16_TFLOPS:.1f}%) |",
        f"| peak GPU memory MB | {torch.cuda.max_memory_allocated() / 2**20:,.0f} |",
        "",
        "```",
        prof.key_averages().table(sort_by="self_device_time_total", row_limit=args.top, max_name_column_width=60),
        "```",
        "",
    ]
    torch.cuda.reset_peak_memory_stats()
    return lines


def main() -> None:
    args = parse_args()
    if not torch.cuda.is_available():
        sys.exit("profile_step.py needs a CUDA GPU")
    lines = [f"## Training step profile: {torch.cuda.get_device_name()}, torch {torch.__version__}", "",
             "command: `python " + " ".join(sys.argv) + "`", ""]
    print("\n".join(lines))
    for mode in args.compile:  # written after each mode, so a timeout keeps the modes already profiled
        mode_lines = profile_mode(args, mode)
        print("\n".join(mode_lines))
        lines += mode_lines
        if args.out:
            args.out.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
