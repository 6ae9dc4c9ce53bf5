"""Data at scale: ``ordo prepare`` on a large synthetic corpus, and the training loader's memory.

For each corpus size (default 100,000 and 1,000,000 pairs of ``ordo.data.synthetic``'s SVO->SOV language) this
writes the corpus, runs ``ordo prepare`` in its own process and reports pairs/s and that process's peak
resident memory, with its CPU time (user + system, so that a busy machine does not change the figure) and its
wall time. ``ordo prepare`` streams the corpus and trains SentencePiece on a sample of at most
``spm_input_sentence_size`` sentences (default 2,000,000, two per pair for the joint model), so its peak is
flat once the corpus exceeds the sample (1,000,000 pairs here). Then, in a fresh process per size, it opens the
prepared training split as the trainer does
and draws one epoch of token batches (batching by length, collating every batch), reporting the peak memory.
The prepared token arrays are memory-mapped, so the loader's memory is the per-pair index (offsets and
sizes, a few bytes per pair), not the corpus: the table shows how much it grows from the smaller corpus to
the larger one.

With ``--shards N`` it also cuts each corpus's training pairs into N contiguous parts, prepares each with
``ordo prepare --vocab-from`` the whole corpus's directory (:mod:`ordo.data.shards`: no SentencePiece training),
and runs the trainer's own loader (``Trainer.updates``, every batch collated, no model step) over the whole
directory for one epoch and over the N shards for N epochs, the same pairs either way, reporting the peak
memory each adds over what the process held before the training data was opened.

usage: python bench/prepare_scale.py [--sizes 100000,1000000] [--shards N] [--work DIR]
                                     [--out bench/results/prepare_scale.md]

A corpus is written once into ``--work`` and kept; one above 3,000,000 pairs repeats the 3,000,000-pair one
(:func:`write_corpus`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


UNIQUE_PAIRS = 3_000_000  # the largest corpus drawn without repeats; a larger one repeats it (write_corpus)


def write_corpus(corpus: Path, pairs: int) -> float:
    """Write ``train.src/.tgt`` (``pairs`` lines) and small valid/test splits; returns seconds taken.

    Up to :data:`UNIQUE_PAIRS` the pairs are distinct (``ordo.data.synthetic.write_corpus``, which draws ever
    more often as the language's short sentences run out: 844 s for 3,000,000 pairs on a busy core). A larger
    corpus is that one's training pairs over and over, cut at ``pairs``, and its valid and test splits: what
    ``ordo prepare`` holds does not depend on repeats (it streams the corpus and samples sentences for
    SentencePiece), so the memory figures of such a corpus are those of a distinct one."""
    from ordo.data.synthetic import write_corpus as write_synthetic

    if (corpus / "test.tgt").exists():
        return 0.0
    start = time.perf_counter()
    if pairs <= UNIQUE_PAIRS:
        write_synthetic(corpus, {"train": pairs, "valid": 500, "test": 500}, seed=1)
        return time.perf_counter() - start
    unique = corpus.parent / f"corpus_{UNIQUE_PAIRS}"
    write_corpus(unique, UNIQUE_PAIRS)
    corpus.mkdir(parents=True, exist_ok=True)
    for side in ("src", "tgt"):
        with open(corpus / f"train.{side}", "w", encoding="utf-8") as out:
            left = pairs
            while left:
                with open(unique / f"train.{side}", encoding="utf-8") as lines:
                    for line in itertools.islice(lines, left):
                        out.write(line)
                        left -= 1
    for split, side in itertools.product(("valid", "test"), ("src", "tgt")):  # test last: it marks a whole corpus
        shutil.copyfile(unique / f"{split}.{side}", corpus / f"{split}.{side}")
    return time.perf_counter() - start


def child_peak_mb(command: list[str]) -> tuple[float, float, str, float]:
    """Run ``command``; return (its CPU seconds, user + system, its own peak resident memory in MB, its stdout,
    its wall seconds).

    CPU time is the figure that holds on a machine that is busy with other work; wall time is given beside it.
    """
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=stdout, stderr=stderr, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = usage.ru_utime + usage.ru_stime
        stdout.seek(0)
        stderr.seek(0)
        if child.returncode != 0:
            sys.exit(f"{' '.join(command)} failed:\n{stderr.read()[-2000:]}")
        return seconds, usage.ru_maxrss / 1024, stdout.read(), wall


def prepare(corpus: Path, data: Path) -> tuple[float, float, float]:
    """``ordo prepare`` of the corpus into ``data``: (CPU seconds, peak MB, wall seconds)."""
    ordo = str(Path(sys.executable).parent / "ordo")
    command = [ordo, "prepare", "--out", str(data), "--vocab-size", "8000"]
    for split in ("train", "valid", "test"):
        command += [f"--{split}-src", str(corpus / f"{split}.src"), f"--{split}-tgt", str(corpus / f"{split}.tgt")]
    seconds, peak, _, wall = child_peak_mb(command)
    return seconds, peak, wall


def resident_mb() -> dict[str, float]:
    """This process's resident memory now, in MB: anonymous (its own arrays) and file-backed (pages of the
    memory-mapped token arrays it has read, which the kernel can drop and read again), from /proc/self/status."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("RssAnon", "RssFile"):
            fields[name] = int(value.split()[0]) / 1024
    return fields


def loader_epoch(data: str) -> None:
    """(In a child process.) Draw one epoch of 3,000-token batches from ``data``'s train split; print a JSON line
    with the peak resident memory and the anonymous and file-backed parts added by the end of the epoch."""
    from ordo.data.batching import collate, epoch_batches
    from ordo.data.corpus import ParallelData

    start = time.process_time()
    before = resident_mb()
    split = ParallelData.open(Path(data), "train")
    batches = epoch_batches(split.src.lengths, split.tgt.lengths, 3000, seed=1, epoch=1)
    tokens = 0
    for indices in batches:
        batch = collate(indices, [split.src[i] for i in indices], [split.tgt[i] for i in indices])
        assert batch.tgt_out is not None
        tokens += batch.num_tgt_tokens
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    after = resident_mb()
    print(json.dumps({"pairs": len(split), "batches": len(batches), "tgt_tokens": tokens,
                      "seconds": time.process_time() - start, "peak_mb": rss,
                      "anon_mb": after["RssAnon"] - before["RssAnon"], "file_mb": after["RssFile"] - before["RssFile"]}))


def write_shard_texts(corpus: Path, shards: int) -> list[tuple[Path, Path]]:
    """Cut the training pairs of ``corpus`` into ``shards`` contiguous parts of (nearly) equal size, written once
    as ``shard{k}.src/.tgt`` beside them; returns their (source, target) files."""
    files = [(corpus / f"shard{k}.src", corpus / f"shard{k}.tgt") for k in range(shards)]
    if all(tgt.exists() for _, tgt in files):
        return files
    with open(corpus / "train.src", encoding="utf-8") as lines:
        pairs = sum(1 for _ in lines)
    per_shard = -(-pairs // shards)
    for side, index in (("src", 0), ("tgt", 1)):
        with open(corpus / f"train.{side}", encoding="utf-8") as lines:
            for shard_files in files:
                with open(shard_files[index], "w", encoding="utf-8") as out:
                    out.writelines(itertools.islice(lines, per_shard))
    return files


def prepare_shards(corpus: Path, data: Path, shards: int) -> tuple[list[Path], float, float]:
    """``ordo prepare --vocab-from data`` of each part of ``corpus``'s training pairs (:func:`write_shard_texts`);
    returns the shard directories, the CPU seconds of all and the largest peak MB of one."""
    ordo = str(Path(sys.executable).parent / "ordo")
    dirs, seconds, peak = [], 0.0, 0.0
    for index, (src, tgt) in enumerate(write_shard_texts(corpus, shards)):
        shard = data.parent / f"{data.name}.shard{index}"
        command = [ordo, "prepare", "--train-src", str(src), "--train-tgt", str(tgt), "--vocab-from", str(data),
                   "--out", str(shard)]
        shard_seconds, shard_peak, _, _ = child_peak_mb(command)
        dirs.append(shard)
        seconds, peak = seconds + shard_seconds, max(peak, shard_peak)
    return dirs, seconds, peak


def trainer_loader(data: str, epochs: int) -> None:
    """(In a child process.) The trainer's loader over ``epochs`` epochs of ``data`` (a directory, or shards
    ``DIR1:DIR2``) in 3,000-token batches, each collated as a training step does (no model step); print a JSON line
    with the pairs and batches read, the peak resident memory above the memory before the training data was
    opened, and the anonymous and file-backed memory added by the end."""
    import tempfile

    from ordo.build import build_model
    from ordo.config import load_config
    from ordo.data.corpus import DataMeta
    from ordo.data.shards import data_dirs
    from ordo.training.trainer import Trainer

    cfg = load_config(None, [f"data={data}", "model.preset=tiny", "train.max_tokens=3000", "train.device=cpu",
                             f"train.max_epochs={epochs}", "train.progress=false"])
    meta = DataMeta.load(data_dirs(data)[0])
    model = build_model(cfg.model, meta.src_vocab_size, meta.tgt_vocab_size, meta.joint_vocab).model
    start = time.process_time()
    with tempfile.TemporaryDirectory() as run_dir:
        before = resident_mb()
        trainer = Trainer(model, cfg, Path(run_dir))
        pairs, batches = 0, 0
        for group in trainer.updates():
            for indices in group:
                trainer.batches.host_batch(trainer.batches.train_data, indices)
                pairs, batches = pairs + len(indices), batches + 1
    after = resident_mb()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before["RssAnon"] - before["RssFile"]
    print(json.dumps({"pairs": pairs, "batches": batches, "seconds": time.process_time() - start, "peak_mb": peak,
                      "anon_mb": after["RssAnon"] - before["RssAnon"], "file_mb": after["RssFile"] - before["RssFile"]}))


def compare_shards(corpus: Path, data: Path, pairs: int, shards: int) -> dict:
    """Prepare ``shards`` parts of the corpus and run :func:`trainer_loader` over the whole directory (one epoch)
    and over the shards (``shards`` epochs); returns the figures of both and of the shards' preparation."""
    dirs, prepare_seconds, prepare_peak = prepare_shards(corpus, data, shards)
    runs = {}
    for name, setting, epochs in (("one directory", str(data), 1), (f"{shards} shards", ":".join(map(str, dirs)), shards)):
        _, _, out, _ = child_peak_mb([sys.executable, __file__, "--trainer-loader", setting, "--epochs", str(epochs)])
        runs[name] = json.loads(out.strip().splitlines()[-1])
        print(f"{pairs} pairs, {name}: loader peak +{runs[name]['peak_mb']:.0f} MB", flush=True)
    return {"pairs": pairs, "shards": shards, "prepare_seconds": prepare_seconds, "prepare_peak": prepare_peak,
            "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated corpus sizes (pairs)")
    parser.add_argument("--work", type=Path, default=ROOT / "work" / "prepare_scale")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "prepare_scale.md")
    parser.add_argument("--shards", type=int, default=0, help="also compare the trainer's loader over N shards")
    parser.add_argument("--loader", help=argparse.SUPPRESS)
    parser.add_argument("--trainer-loader", help=argparse.SUPPRESS)
    parser.add_argument("--epochs", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loader:
        loader_epoch(args.loader)
        return
    if args.trainer_loader:
        trainer_loader(args.trainer_loader, args.epochs)
        return
    rows, shard_rows = [], []
    for pairs in (int(s) for s in args.sizes.split(",")):
        corpus, data = args.work / f"corpus_{pairs}", args.work / f"data_{pairs}"
        generated = write_corpus(corpus, pairs)
        seconds, peak, wall = prepare(corpus, data)
        _, _, out, _ = child_peak_mb([sys.executable, __file__, "--loader", str(data)])
        loader = json.loads(out.strip().splitlines()[-1])
        rows.append((pairs, wall, seconds, peak, loader))
        print(f"{pairs} pairs: corpus written in {generated:.0f} s; prepare {seconds:.0f} CPU s "
              f"({pairs / seconds:,.0f} pairs per CPU s), {wall:.0f} s wall, peak {peak:.0f} MB; "
              f"loader epoch {loader['seconds']:.0f} CPU s, peak {loader['peak_mb']:.0f} MB", flush=True)
        if args.shards > 1:
            shard_rows.append(compare_shards(corpus, data, pairs, args.shards))
    report(rows, shard_rows, args.out)


def report(rows: list[tuple[int, float, float, float, dict]], shard_rows: list[dict], out: Path) -> None:
    """Write the tables and the command line to ``out`` and print them; ``rows`` hold (pairs, prepare wall seconds,
    prepare CPU seconds, prepare peak MB, the loader's JSON line), ``shard_rows`` what :func:`compare_shards`
    returned."""
    from ordo.data.prepare import PrepareConfig

    cap = PrepareConfig.spm_input_sentence_size
    lines = [f"command: `python bench/prepare_scale.py {' '.join(sys.argv[1:])}`", "",
             ("| pairs | SentencePiece sentences | prepare CPU s | prepare wall s | pairs per CPU s | prepare peak MB | "
              "loader epoch CPU s | loader batches | loader peak MB | loader anonymous / file-backed MB at the end |"),
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for pairs, wall, seconds, peak, loader in rows:
        lines.append(f"| {pairs:,} | {min(2 * pairs, cap):,} | {seconds:.0f} | {wall:.0f} | {pairs / seconds:,.0f} | "
                     f"{peak:.0f} | {loader['seconds']:.0f} | {loader['batches']:,} | {loader['peak_mb']:.0f} | "
                     f"{loader['anon_mb']:.0f} / {loader['file_mb']:.0f} |")
    if len(rows) > 1:
        (small, *_, small_loader), (large, *_, large_loader) = rows[0], rows[-1]
        growth = {key: (large_loader[key] - small_loader[key]) * 2**20 / (large - small)
                  for key in ("peak_mb", "anon_mb", "file_mb")}
        lines.append("")
        lines.append(f"From {small:,} to {large:,} pairs the loader's memory grows per extra pair by "
                     f"{growth['peak_mb']:.0f} bytes at its peak, {growth['anon_mb']:.0f} in its own arrays and "
                     f"{growth['file_mb']:.0f} in pages of the memory-mapped arrays read (the kernel's to drop).")
    if shard_rows:
        lines += ["", ("The trainer's loader over the whole directory (one epoch) and over its training pairs prepared as "
                  "shards with `--vocab-from` (one epoch each), peak resident memory above the process's before the "
                  "training data was opened:"), "",
                  ("| pairs | layout | pairs read | batches | loader CPU s | loader peak MB | anonymous / file-backed MB "
                  "at the end | shards' prepare CPU s (all) / peak MB (one) |"),
                  "|---:|---|---:|---:|---:|---:|---:|---:|"]
        for row in shard_rows:
            for name, run in row["runs"].items():
                prepared = f"{row['prepare_seconds']:.0f} / {row['prepare_peak']:.0f}" if "shards" in name else ""
                lines.append(f"| {row['pairs']:,} | {name} | {run['pairs']:,} | {run['batches']:,} | "
                             f"{run['seconds']:.0f} | {run['peak_mb']:.0f} | {run['anon_mb']:.0f} / "
                             f"{run['file_mb']:.0f} | {prepared} |")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
