"""ordo and fairseq trained on the same real data, side by side, in alternating rounds (issue 28).

Data. Multi30k En→De and small_parallel_enja Ja→En (``../shared/data``). ordo's data comes from ``ordo prepare``
with the recipe's settings (``recipes/<corpus>/prepare.yaml``: a joint 8k unigram SentencePiece model; training
pairs over 100 pieces or with a length ratio over 3 dropped). fairseq reads the same kept pairs: their text
(``{train,valid}.{src,tgt}.txt`` in ordo's data directory) is cut into pieces by ordo's ``spm.model`` and binarized by
``fairseq-preprocess --joined-dictionary``, after a check that every sentence has as many pieces as in ordo's token
arrays. fairseq's dictionary holds the pieces that occur in the training text, its 4 special symbols and filler
entries up to a multiple of 8, so its output layer can differ a little from ordo's 8,000; the report gives both.

Model and optimisation. The recipe's ``train.yaml`` as ordo resolves it (the ``small`` preset: d 256, 4 heads, FFN
1024, 3+3 layers, all embeddings shared, dropout 0.2, no attention or activation dropout, post-norm; label smoothing
0.1; Adam β (0.9, 0.98), ε 1e-9; inverse square root schedule to lr 1e-3 after 600 warm-up updates from 1e-7; no
clipping; seed 1), passed to ``fairseq-train --arch transformer`` field by field: the dimensions,
``--share-all-embeddings``, post-norm (no ``--encoder-normalize-before``/``--decoder-normalize-before``, as
ordo's ``model.norm: post``), ``--criterion label_smoothed_cross_entropy``, ``--adam-betas/--adam-eps``,
``--lr-scheduler inverse_sqrt --warmup-updates --warmup-init-lr``. Both use the same number of threads
(``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` for both, ``train.threads`` for ordo). Both train in float32, unless
``--ordo-amp bf16`` puts ordo under bf16 autocast (each toolkit at its fastest on a CPU with AVX512_BF16 or AMX:
fairseq 0.12 has no bf16 on a CPU); that comparison is reported in a section of its own.

Batches. Both toolkits count a pair as max(source pieces + EOS, target pieces + EOS) tokens and fill a batch until
one more pair would take (longest pair) × (pairs) over ``--max-tokens``, padding included
(``ordo.data.batching.batch_by_tokens``; fairseq's ``batch_by_size`` over ``LanguagePairDataset.num_tokens``).
fairseq runs with ``--required-batch-size-multiple 1`` (its default, 8, cuts every batch to a multiple of 8 pairs
and drops the last batch), so the filling rule is the same; what still differs is the order they sort pairs in
before cutting (ordo: by that max; fairseq: by source length, ties by target length), and therefore the padding:
the report gives each toolkit's padded share of source and target positions over one epoch, fairseq's from its own
``get_batch_iterator`` (the one ``fairseq-train`` calls) run in its venv.

Figures. Each run trains from scratch in its own process for ``--warmup`` + ``--updates`` updates; only the
updates after the warm-up count, so start-up, the first steps and ordo's final validation and checkpoint are
excluded. Both log every gcd(warm-up, updates) updates:

- ordo: ``train.log``'s "tgt tok/s" = the target tokens of the interval's updates (non-padding, EOS included) / the
  wall time since the previous log line (``Trainer.log_stats``): batch collation, forward, loss, backward, the
  optimiser and logging.
- fairseq: ``train_inner`` "wps" = the criterion's ``ntokens`` (non-padding target tokens, EOS included) summed by
  a ``TimeMeter`` since its reset at the previous ``train_inner`` line, / the time since that reset
  (``fairseq/tasks/fairseq_task.py`` ``reduce_metrics``, ``fairseq/logging/meters.py``, ``fairseq_cli/train.py``):
  the same span of work, with its data loading in a worker process (``--num-workers 1``, fairseq's default).

What the two do differently for the same update is part of what is measured: fairseq's criterion takes the log-softmax
of the full (batch × target length, vocabulary) logits, padded positions included, where ordo's loss projects the
real positions alone in chunks; ordo's encoder runs on the real tokens alone when under 90% of its positions are
real (``PACK_BELOW``); fairseq computes the gradient norm every update even without clipping, scales the gradients
by 1/tokens in a separate pass, and steps its own Adam parameter by parameter in Python (the fused one is for CUDA),
where ordo's Adam is torch's fused CPU kernel; fairseq collates batches in a worker process, ordo in the training
loop.

A run's figure is the target tokens of the measured updates over their time: Σ tokens / Σ (tokens / rate) over the
intervals, with an interval's tokens from ordo's batch list (a pure function of the lengths, seed and epoch) and
from fairseq's "wpb" (mean target tokens per update). Rounds alternate which toolkit goes first; the report keeps
every round, the median of the per-round ratios ordo/fairseq and their spread (min-max).

``--profile`` instead times where one training step of ordo goes over ``--profile-batches`` real batches of the first
corpus at the first ``--max-tokens`` (data, encoder, decoder, loss, backward parts, optimiser; then torch.profiler's
busiest operators and backward functions, and the time outside ATen operators) and writes its own section into the
same results file.

usage: python bench/fairseq_real.py [--corpora multi30k small_parallel_enja] [--max-tokens 3000 4096] [--rounds 3]
           [--updates 300] [--warmup 50] [--work DIR] [--out bench/results/fairseq_real.md]
       python bench/fairseq_real.py --profile [--corpora multi30k] [--max-tokens 3000] [--profile-batches 30]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

if not __package__:  # run as `python bench/NAME.py`: the repository root, not bench/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.machine import cpu_description
from ordo.api import build_for_data
from ordo.config import ExperimentConfig, load_config
from ordo.data.batching import epoch_batches
from ordo.data.corpus import DataMeta, ParallelData
from ordo.data.textio import atomic_write, read_lines
from ordo.losses import output_nll
from ordo.models.transformer import PACK_BELOW
from ordo.training.optim import inverse_sqrt_lr, set_lr
from ordo.training.trainer import Trainer

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Corpus:
    """A corpus of ``../shared/data`` with its recipe (``recipes/<name>/``)."""

    name: str  # folder name under the data root and under recipes/
    title: str  # how the report names it
    src: str  # source language suffix of the files
    tgt: str  # target language suffix


CORPORA = {
    corpus.name: corpus
    for corpus in (Corpus("multi30k", "Multi30k En→De", "en", "de"),
                   Corpus("small_parallel_enja", "small_parallel_enja Ja→En", "ja", "en"))
}


def log(message: str) -> None:
    """A progress line on stderr, with the time."""
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def run_logged(command: Sequence[str], log_path: Path, env: dict[str, str] | None = None) -> None:
    """Run ``command`` from the repository root with its output in ``log_path``; on failure raise with the log's
    tail."""
    with open(log_path, "w", encoding="utf-8") as handle:
        done = subprocess.run(list(command), cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode != 0:
        tail = "\n".join(read_lines(log_path)[-20:])
        raise RuntimeError(f"{shlex.join(command)} exited with {done.returncode} (log {log_path}):\n{tail}")


# -- data ------------------------------------------------------------------------------------------------------


def prepare_ordo(corpus: Corpus, data_root: Path, work: Path) -> Path:
    """``ordo prepare`` of the corpus's train and valid splits with its recipe's settings (as
    ``recipes/lib.sh`` calls it), into ``work/<corpus>/ordo_data``; kept when already there."""
    out = work / corpus.name / "ordo_data"
    if (out / "data.yaml").exists():
        return out
    source = data_root / corpus.name
    log(f"{corpus.name}: ordo prepare -> {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    run_logged([sys.executable, "-m", "ordo", "prepare", str(ROOT / "recipes" / corpus.name / "prepare.yaml"),
                "--out", str(out),
                "--train-src", str(source / f"train.{corpus.src}.gz"), "--train-tgt", str(source / f"train.{corpus.tgt}.gz"),
                "--valid-src", str(source / f"valid.{corpus.src}.gz"), "--valid-tgt", str(source / f"valid.{corpus.tgt}.gz")],
               out.parent / "ordo_prepare.log")
    return out


def prepare_fairseq(corpus: Corpus, data_dir: Path, venv: Path, work: Path) -> Path:
    """The kept pairs of ``data_dir`` cut into pieces by its ``spm.model`` and binarized by ``fairseq-preprocess
    --joined-dictionary`` (languages ``src`` and ``tgt``) into ``work/<corpus>/fairseq_data``; kept when already
    there.

    Raises:
        RuntimeError: when a sentence's pieces differ in number from ordo's token arrays.
    """
    import sentencepiece

    out = work / corpus.name / "fairseq_data"
    if (out / "train.src-tgt.tgt.idx").exists():
        return out
    meta = DataMeta.load(data_dir)
    if not meta.joint_vocab:
        raise RuntimeError(f"{data_dir}: fairseq's --share-all-embeddings needs the joint vocabulary")
    pieces_dir = work / corpus.name / "pieces"
    pieces_dir.mkdir(parents=True, exist_ok=True)
    model = sentencepiece.SentencePieceProcessor(model_file=str(data_dir / meta.src_vocab))
    for split in ("train", "valid"):
        arrays = ParallelData.open(data_dir, split)
        for side, lengths in (("src", arrays.src.lengths), ("tgt", arrays.tgt.lengths)):
            pieces = model.encode(read_lines(data_dir / f"{split}.{side}.txt"), out_type=str)
            counts = np.array([len(p) for p in pieces])
            if counts.shape != lengths.shape or not np.array_equal(counts, lengths):
                raise RuntimeError(f"{data_dir}: {split}.{side}: spm.model's pieces differ from ordo's arrays")
            with atomic_write(pieces_dir / f"{split}.{side}") as handle:
                handle.writelines(" ".join(p) + "\n" for p in pieces)
    log(f"{corpus.name}: fairseq-preprocess -> {out}")
    run_logged([str(venv / "bin" / "fairseq-preprocess"), "--source-lang", "src", "--target-lang", "tgt",
                "--trainpref", str(pieces_dir / "train"), "--validpref", str(pieces_dir / "valid"),
                "--destdir", str(out), "--joined-dictionary", "--workers", "2"],
               work / corpus.name / "fairseq_preprocess.log", fairseq_env(2))
    return out


def vocabulary_sizes(data_dir: Path, bin_dir: Path) -> tuple[int, int, int]:
    """ordo's vocabulary size, fairseq's dictionary size (its 4 special symbols included) and how many of
    fairseq's entries are fillers (``madeupword``) up to a multiple of 8."""
    entries = [line.split(" ", 1)[0] for line in read_lines(bin_dir / "dict.src.txt")]
    fillers = sum(entry.startswith("madeupword") for entry in entries)
    return DataMeta.load(data_dir).src_vocab_size, len(entries) + 4, fillers


# -- training runs ---------------------------------------------------------------------------------------------


def recipe_config(corpus: Corpus, data_dir: Path, max_tokens: int, threads: int, amp: str = "off") -> ExperimentConfig:
    """The corpus's ``train.yaml`` resolved by ordo, with this benchmark's data, batch size, threads and
    ``train.amp``."""
    overrides = [f"data={data_dir}", f"train.max_tokens={max_tokens}", f"train.threads={threads}", f"train.amp={amp}"]
    return load_config(ROOT / "recipes" / corpus.name / "train.yaml", overrides)


def ordo_train_command(corpus: Corpus, data_dir: Path, run_dir: Path, max_tokens: int, steps: int, interval: int,
                       threads: int, amp: str) -> list[str]:
    """``ordo train`` with the recipe's settings and ``train.amp`` for ``steps`` updates, logging every
    ``interval``; no validation before the end (and none of its BLEU), no progress bar."""
    overrides = {"max_tokens": max_tokens, "max_steps": steps, "max_minutes": 0, "log_every": interval,
                 "valid_every": steps + 1, "valid_bleu": "false", "progress": "false", "threads": threads,
                 "keep_last": 1, "amp": amp}
    sets = [arg for key, value in overrides.items() for arg in ("--set", f"train.{key}={value}")]
    return [sys.executable, "-m", "ordo", "train", str(ROOT / "recipes" / corpus.name / "train.yaml"),
            "--data", str(data_dir), "--out", str(run_dir), *sets]


def fairseq_train_args(cfg: ExperimentConfig, bin_dir: Path, max_tokens: int, steps: int, interval: int,
                       save_dir: Path) -> list[str]:
    """``fairseq-train`` arguments (without the program) that match ordo's resolved ``cfg``: the model, label
    smoothing, Adam, the schedule and the batch size; ``steps`` updates, ``train_inner`` lines every ``interval``,
    no validation, nothing saved.

    Raises:
        ValueError: for a config this mapping does not cover (not a Transformer, embeddings not all shared).
    """
    model, train = cfg.model, cfg.train
    if model.family != "transformer" or model.share_embeddings != "all" or model.methods:
        raise ValueError("the fairseq mapping covers the baseline Transformer with all embeddings shared")
    if train.update_freq != 1 or train.batch_by != "longer":
        raise ValueError("the fairseq mapping covers train.update_freq 1 and train.batch_by longer")
    args = [str(bin_dir), "--task", "translation", "--source-lang", "src", "--target-lang", "tgt",
            "--arch", "transformer", "--share-all-embeddings", "--activation-fn", "relu"]
    for side in ("encoder", "decoder"):
        args += [f"--{side}-embed-dim", str(model.d_model), f"--{side}-ffn-embed-dim", str(model.ffn_dim),
                 f"--{side}-attention-heads", str(model.heads),
                 f"--{side}-layers", str(model.encoder_layers if side == "encoder" else model.decoder_layers)]
        if model.norm == "pre":
            args.append(f"--{side}-normalize-before")
    args += ["--max-source-positions", str(model.max_positions), "--max-target-positions", str(model.max_positions),
             "--dropout", str(model.dropout), "--attention-dropout", str(model.attention_dropout),
             "--activation-dropout", str(model.activation_dropout),
             "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", str(train.label_smoothing),
             "--optimizer", "adam", "--adam-betas", str(tuple(train.adam_betas)), "--adam-eps", str(train.adam_eps),
             "--weight-decay", str(train.weight_decay), "--clip-norm", str(train.clip_norm),
             "--lr", str(train.lr), "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(train.warmup_steps),
             "--warmup-init-lr", str(train.warmup_init_lr),
             "--max-tokens", str(max_tokens), "--required-batch-size-multiple", "1", "--max-update", str(steps),
             "--seed", str(train.seed), "--cpu", "--disable-validation", "--no-save", "--save-dir", str(save_dir),
             "--log-format", "simple", "--log-interval", str(interval)]
    return args


def fairseq_env(threads: int) -> dict[str, str]:
    """The environment of fairseq's processes: ours without PYTHONPATH (ordo's checkout), with the thread counts."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return env | thread_env(threads)


def thread_env(threads: int) -> dict[str, str]:
    """OpenMP and MKL thread counts for a training process."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


ORDO_LINE = re.compile(r"\| train \| update (\d+) \|.*\| tgt tok/s (\d+)$")
FAIRSEQ_FIELD = re.compile(r"(\w+)=([-+.\deE]+)")


def ordo_intervals(train_log: Path) -> dict[int, float]:
    """``update -> tgt tok/s`` of every interval line of an ordo ``train.log``."""
    found = (ORDO_LINE.search(line) for line in read_lines(train_log))
    return {int(m.group(1)): float(m.group(2)) for m in found if m}


def fairseq_intervals(output: Path) -> dict[int, tuple[float, float]]:
    """``num_updates -> (wps, wpb)`` of every ``train_inner`` line of fairseq-train's output."""
    intervals = {}
    for line in read_lines(output):
        if "| train_inner |" in line:
            fields = dict(FAIRSEQ_FIELD.findall(line))
            intervals[int(fields["num_updates"])] = (float(fields["wps"]), float(fields["wpb"]))
    return intervals


def ordo_update_tokens(data_dir: Path, max_tokens: int, seed: int, steps: int) -> list[int]:
    """Target tokens (EOS included) of each of ordo's first ``steps`` updates: its batch list epoch after epoch
    (``BatchStream.epoch_batch_list`` of one process, batches by the longer side, one batch per update)."""
    train = ParallelData.open(data_dir, "train")
    src, tgt = train.src.lengths, train.tgt.lengths
    tokens: list[int] = []
    epoch = 1
    while len(tokens) < steps:
        tokens += [int((tgt[batch] + 1).sum()) for batch in epoch_batches(src, tgt, max_tokens, seed, epoch)]
        epoch += 1
    return tokens[:steps]


def measured_rate(intervals: Sequence[tuple[float, float]]) -> float:
    """Tokens per second over ``(tokens, tokens per second)`` intervals: their tokens over their summed time."""
    return sum(tokens for tokens, _ in intervals) / sum(tokens / rate for tokens, rate in intervals)


@dataclass
class Setting:
    """What every run of one corpus and batch size shares."""

    corpus: Corpus
    data_dir: Path  # ordo's prepared data
    bin_dir: Path  # fairseq's binarized data
    max_tokens: int
    warmup: int
    updates: int
    threads: int
    work: Path  # where this setting's runs go
    amp: str = "off"  # ordo's train.amp (fairseq trains in float32: it has no bf16 on a CPU)

    @property
    def interval(self) -> int:
        """Updates per log line: every interval ends at the warm-up's end or after it."""
        return math.gcd(self.warmup, self.updates)

    @property
    def steps(self) -> int:
        """Updates of each run."""
        return self.warmup + self.updates

    def measured_ends(self) -> list[int]:
        """The updates that end a measured interval."""
        return list(range(self.warmup + self.interval, self.steps + 1, self.interval))


def run_ordo(setting: Setting, round_index: int) -> float:
    """One ordo run from scratch: its target tokens/s over the measured updates."""
    run_dir = setting.work / f"round{round_index}" / "ordo"
    if run_dir.exists():  # an old run directory would be resumed
        shutil.rmtree(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    command = ordo_train_command(setting.corpus, setting.data_dir, run_dir, setting.max_tokens, setting.steps,
                                 setting.interval, setting.threads, setting.amp)
    run_logged(command, run_dir.parent / "ordo.out", dict(os.environ) | thread_env(setting.threads))
    rates = ordo_intervals(run_dir / "train.log")
    shutil.rmtree(run_dir / "checkpoints")  # the final checkpoint and best.pt: ~190 MB a run, not needed
    cfg = recipe_config(setting.corpus, setting.data_dir, setting.max_tokens, setting.threads)
    tokens = ordo_update_tokens(setting.data_dir, setting.max_tokens, cfg.train.seed, setting.steps)
    intervals = []
    for end in setting.measured_ends():
        if end not in rates:
            raise RuntimeError(f"{run_dir / 'train.log'}: no interval line at update {end}")
        intervals.append((float(sum(tokens[end - setting.interval : end])), rates[end]))
    return measured_rate(intervals)


def run_fairseq(setting: Setting, round_index: int, venv: Path) -> float:
    """One fairseq run from scratch: its target tokens/s over the measured updates."""
    out_dir = setting.work / f"round{round_index}"
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = recipe_config(setting.corpus, setting.data_dir, setting.max_tokens, setting.threads)
    args = fairseq_train_args(cfg, setting.bin_dir, setting.max_tokens, setting.steps, setting.interval,
                              out_dir / "fairseq_save")
    output = out_dir / "fairseq.out"
    run_logged([str(venv / "bin" / "fairseq-train"), *args], output, fairseq_env(setting.threads))
    lines = fairseq_intervals(output)
    intervals = []
    for end in setting.measured_ends():
        if end not in lines:
            raise RuntimeError(f"{output}: no train_inner line at update {end}")
        wps, wpb = lines[end]
        intervals.append((wpb * setting.interval, wps))
    return measured_rate(intervals)


# -- padding ---------------------------------------------------------------------------------------------------


@dataclass
class Padding:
    """The batches of one epoch of the training set, and how much of them is padding."""

    batches: int
    pairs: int  # pairs in the epoch's batches (after the toolkit's length filtering)
    tgt_tokens_per_batch: float  # non-padding target tokens (EOS included) per batch
    src_padding: float  # padded share of the source positions
    tgt_padding: float  # padded share of the target positions
    packed: float  # share of batches under PACK_BELOW real source positions (ordo's encoder skips their padding)


def padding_of(src_sizes: np.ndarray, tgt_sizes: np.ndarray, batches: Sequence[np.ndarray]) -> Padding:
    """Padding of ``batches`` (index arrays) whose pairs have ``src_sizes``/``tgt_sizes`` positions (EOS, or BOS,
    included): a batch of n pairs has n × (longest) positions on each side."""
    src_real = src_padded = tgt_real = tgt_padded = packed = 0
    for batch in batches:
        src, tgt = src_sizes[batch], tgt_sizes[batch]
        src_real, tgt_real = src_real + int(src.sum()), tgt_real + int(tgt.sum())
        src_padded, tgt_padded = src_padded + len(batch) * int(src.max()), tgt_padded + len(batch) * int(tgt.max())
        packed += int(src.sum()) < PACK_BELOW * len(batch) * int(src.max())
    return Padding(len(batches), sum(len(b) for b in batches), tgt_real / len(batches), 1 - src_real / src_padded,
                   1 - tgt_real / tgt_padded, packed / len(batches))


FAIRSEQ_BATCHES = """
import sys
import numpy as np
from fairseq import options, tasks, utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
out, args = sys.argv[1], sys.argv[2:]
cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), args))
task = tasks.setup_task(cfg.task)
task.load_dataset(cfg.dataset.train_subset, epoch=1, combine=True)
model = task.build_model(cfg.model)
iterator = task.get_batch_iterator(  # as fairseq.trainer.Trainer.get_train_iterator calls it
    dataset=task.dataset(cfg.dataset.train_subset), max_tokens=cfg.dataset.max_tokens,
    max_sentences=cfg.dataset.batch_size,
    max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions(), cfg.dataset.max_tokens),
    ignore_invalid_inputs=True, required_batch_size_multiple=cfg.dataset.required_batch_size_multiple,
    seed=cfg.common.seed, epoch=1)
batches = list(iterator.frozen_batches)
np.savez(out, indices=np.concatenate(batches), counts=np.array([len(b) for b in batches]))
"""


ORDO_TIES = "ordo, ties by target length"  # the padding row of a batching ordo does not train with (a lever)


def padding_both(setting: Setting, venv: Path) -> dict[str, Padding]:
    """Padding of one epoch of ordo's batches (its own batching, epoch 1) and of fairseq's (its batch iterator,
    built in its venv with the training run's arguments); and, as :data:`ORDO_TIES`, of ordo's batching with pairs
    of equal size ordered by target length (``bucket_width=1, sort_within=target lengths``), the way fairseq orders
    pairs of equal source length."""
    train = ParallelData.open(setting.data_dir, "train")
    lengths = (train.src.lengths, train.tgt.lengths)
    src, tgt = lengths[0] + 1, lengths[1] + 1  # + EOS (source, target out) or BOS (target in)
    cfg = recipe_config(setting.corpus, setting.data_dir, setting.max_tokens, setting.threads)
    ordo = padding_of(src, tgt, epoch_batches(*lengths, setting.max_tokens, cfg.train.seed, 1))
    ties = padding_of(src, tgt, epoch_batches(*lengths, setting.max_tokens, cfg.train.seed, 1, bucket_width=1,
                                              sort_within=lengths[1]))
    out = setting.work / "fairseq_batches.npz"
    args = fairseq_train_args(cfg, setting.bin_dir, setting.max_tokens, setting.steps, setting.interval,
                              setting.work / "fairseq_save")
    run_logged([str(venv / "bin" / "python"), "-c", FAIRSEQ_BATCHES, str(out), *args], setting.work / "batches.out",
               fairseq_env(setting.threads))
    saved = np.load(out)
    # fairseq's dataset holds the same pairs in the same order (checked piece by piece in prepare_fairseq)
    fairseq = padding_of(src, tgt, np.split(saved["indices"], np.cumsum(saved["counts"])[:-1]))
    return {"ordo": ordo, "fairseq": fairseq, ORDO_TIES: ties}


# -- the comparison --------------------------------------------------------------------------------------------


@dataclass
class Round:
    """One round: each toolkit's target tokens/s and which went first."""

    first: str
    ordo: float
    fairseq: float

    @property
    def ratio(self) -> float:
        """ordo / fairseq."""
        return self.ordo / self.fairseq


@dataclass
class SettingResult:
    """The rounds and the padding of one corpus at one batch size."""

    setting: Setting
    rounds: list[Round]
    padding: dict[str, Padding]  # by toolkit


@dataclass
class CorpusResult:
    """Everything measured on one corpus."""

    corpus: Corpus
    vocabulary: tuple[int, int, int]  # see vocabulary_sizes
    settings: list[SettingResult]


def compare(setting: Setting, rounds: int, venv: Path) -> list[Round]:
    """``rounds`` rounds of one ordo run and one fairseq run, alternating which goes first."""
    results = []
    for index in range(1, rounds + 1):
        order = ["ordo", "fairseq"] if index % 2 else ["fairseq", "ordo"]
        rates = {}
        for toolkit in order:
            label = f"{setting.corpus.name} {setting.max_tokens} round {index}/{rounds} {toolkit}"
            log(f"{label}: {setting.steps} updates")
            started = time.perf_counter()
            rates[toolkit] = run_ordo(setting, index) if toolkit == "ordo" else run_fairseq(setting, index, venv)
            log(f"{label}: {rates[toolkit]:,.0f} tgt tok/s over updates {setting.warmup + 1}-{setting.steps} "
                f"({time.perf_counter() - started:.0f} s with start-up)")
        results.append(Round(order[0], rates["ordo"], rates["fairseq"]))
        log(f"{setting.corpus.name} {setting.max_tokens} round {index}: ordo/fairseq {results[-1].ratio:.2f}")
    return results


def versions(venv: Path) -> str:
    """torch of this process, and torch and fairseq of the fairseq venv."""
    done = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import torch, fairseq; print(torch.__version__, fairseq.__version__)"],
                          capture_output=True, text=True, check=True, env=fairseq_env(1))
    fairseq_torch, fairseq_version = done.stdout.split()[-2:]
    return f"ordo on torch {torch.__version__}; fairseq {fairseq_version} on torch {fairseq_torch}"


def comparison_heading(amp: str) -> str:
    """The report's heading of a comparison with ordo's ``train.amp`` = ``amp`` (each precision its own section)."""
    return COMPARISON_HEADING if amp == "off" else f"{COMPARISON_HEADING}, ordo in {amp}"


def comparison_section(command: str, venv: Path, threads: int, amp: str, results: list[CorpusResult]) -> str:
    """The markdown of the comparison: the set-up, then per corpus its rounds, ratios and padding."""
    precision = ("Both train in float32." if amp == "off" else
                 f"ordo trains under `train.amp: {amp}` (autocast: {amp} products, float32 weights, optimiser and "
                 "softmax); fairseq in float32, the fastest it offers here: fairseq 0.12 has no bf16 on a CPU "
                 "(`--bf16 --cpu` takes its TPU code path and stops).")
    lines = [f"command: `{command}` ({time.strftime('%Y-%m-%d')})", "",
             f"CPU: {cpu_description()}", "", precision, "",
             (f"{versions(venv)}; {threads} threads each (OMP_NUM_THREADS/MKL_NUM_THREADS, ordo train.threads); "
             f"OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'unset')}. Target tokens/s (non-padding, EOS "
             "included) over the updates after the warm-up; how each figure is read, and what the two toolkits do "
             "alike: the docstring of bench/fairseq_real.py.")]
    for result in results:
        ordo_vocab, fairseq_vocab, fillers = result.vocabulary
        first = result.settings[0].setting
        lines += ["", f"### {result.corpus.title}", "",
                  (f"Vocabulary: ordo {ordo_vocab:,}; fairseq {fairseq_vocab:,} ({fillers} of them filler entries up "
                  f"to a multiple of 8). Updates {first.warmup + 1}-{first.steps} of each run measured, logged every "
                  f"{first.interval}."), "",
                  "| max tokens | round | first | ordo tok/s | fairseq tok/s | ordo/fairseq |",
                  "|---:|---:|---|---:|---:|---:|"]
        for done in result.settings:
            lines += [f"| {done.setting.max_tokens:,} | {i} | {r.first} | {r.ordo:,.0f} | {r.fairseq:,.0f} | "
                      f"{r.ratio:.2f} |" for i, r in enumerate(done.rounds, 1)]
        lines += ["", ("| max tokens | median ordo/fairseq | spread (min-max) | median ordo tok/s | "
                  "median fairseq tok/s |"), "|---:|---:|---|---:|---:|"]
        for done in result.settings:
            ratios = [r.ratio for r in done.rounds]
            lines.append(f"| {done.setting.max_tokens:,} | **{statistics.median(ratios):.2f}** | "
                         f"{min(ratios):.2f}-{max(ratios):.2f} | {statistics.median(r.ordo for r in done.rounds):,.0f} "
                         f"| {statistics.median(r.fairseq for r in done.rounds):,.0f} |")
        lines += ["", ("Padding over one epoch of the training set (padded share of all positions). The last row "
                       f"of each size is not what ordo trains with: \"{ORDO_TIES}\" is ordo's batching with pairs of "
                       "equal size ordered by target length, as fairseq orders pairs of equal source length "
                       "(ordo.data.batching.epoch_batches with bucket_width=1, sort_within=target lengths)."), "",
                  ("| max tokens | toolkit | batches | pairs | tgt tokens/batch | source padding | target padding | "
                  "ordo's encoder packs |"), "|---:|---|---:|---:|---:|---:|---:|---:|"]
        for done in result.settings:
            for toolkit, pad in done.padding.items():
                packs = "-" if toolkit == "fairseq" else f"{100 * pad.packed:.0f}% of batches"
                lines.append(f"| {done.setting.max_tokens:,} | {toolkit} | {pad.batches:,} | {pad.pairs:,} | "
                             f"{pad.tgt_tokens_per_batch:,.0f} | {100 * pad.src_padding:.1f}% | "
                             f"{100 * pad.tgt_padding:.1f}% | {packs} |")
    return "\n".join(lines)


# -- where a step's time goes ----------------------------------------------------------------------------------

PHASES = {
    "data": "batch collation (BatchStream.make_batch)",
    "encoder": "encoder forward",
    "decoder": "decoder forward",
    "loss": "output layer + label-smoothed CE forward (computes its gradient too, chunked)",
    "loss_backward": "backward down to the decoder's output",
    "decoder_backward": "decoder backward",
    "encoder_backward": "encoder backward (and the embeddings')",
    "optimizer": "learning rate, fused Adam step, zero_grad",
}
WARM_STEPS, PROFILED_STEPS = 5, 8  # untimed steps before the timed ones; steps under torch.profiler
BACKWARD_EVENT = "autograd::engine::evaluate_function: "  # torch.profiler's name prefix of a backward function


def step_phases(trainer: Trainer, indices: np.ndarray, step: int) -> dict[str, float]:
    """Seconds of each of :data:`PHASES` in update ``step`` of ``trainer`` on the batch ``indices``, the update
    taken apart by hand as ``Trainer.train_step`` makes it (one batch, no accumulation, no methods): tensor hooks
    stamp the moments the backward pass reaches the decoder's output and the encoder's output."""
    model, optimizer, cfg = trainer.model, trainer.optimizer, trainer.tcfg
    marks = {"start": time.perf_counter()}

    def stamp(name: str) -> Callable[[torch.Tensor], None]:
        return lambda _grad: marks.__setitem__(name, time.perf_counter())

    batch = trainer.batches.make_batch(trainer.batches.train_data, indices)
    assert batch.tgt_in is not None and batch.tgt_out is not None
    marks["data"] = time.perf_counter()
    model.train()
    with trainer.autocast():
        encoder_out = model.encoder(batch)
        marks["encoder"] = time.perf_counter()
        hidden = model.decoder(batch.tgt_in, encoder_out)
        marks["decoder"] = time.perf_counter()
        output = model.teacher_forced_output(batch.tgt_in, hidden, encoder_out)
        loss = output_nll(output.hidden, output.project, batch.tgt_out, cfg.label_smoothing)[0] / batch.num_tgt_tokens
    marks["loss"] = time.perf_counter()
    hidden.register_hook(stamp("loss_backward"))
    encoder_out.states.register_hook(stamp("decoder_backward"))
    loss.backward()
    marks["encoder_backward"] = time.perf_counter()
    set_lr(optimizer, inverse_sqrt_lr(step, cfg))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    marks["optimizer"] = time.perf_counter()
    names = ["start", *PHASES]
    return {name: marks[name] - marks[before] for before, name in itertools.pairwise(names)}


def profile_section(corpus: Corpus, data_dir: Path, max_tokens: int, threads: int, batches: int,
                    command: str, amp: str = "off") -> tuple[str, str]:
    """Where ordo's training step goes on ``batches`` real batches of epoch 1 (after :data:`WARM_STEPS` untimed
    ones) with the recipe's model and optimiser: the phases of :func:`step_phases` and the real
    ``Trainer.train_step``, alternating on each batch (which goes first alternates too), then torch.profiler's
    operators and backward functions over :data:`PROFILED_STEPS` of the batches. Returns the section's heading and
    body."""
    cfg = recipe_config(corpus, data_dir, max_tokens, threads, amp)
    torch.set_num_threads(threads)
    torch.manual_seed(cfg.train.seed)
    with tempfile.TemporaryDirectory() as run_dir:  # the trainer writes nothing here: no checkpoint is saved
        trainer = Trainer(build_for_data(cfg, DataMeta.load(data_dir)).model, cfg, Path(run_dir))
    epoch = trainer.batches.epoch_batch_list(1)
    timed = epoch[WARM_STEPS : WARM_STEPS + batches]
    for step, indices in enumerate(epoch[:WARM_STEPS], 1):
        step_phases(trainer, indices, step)
    stats: dict[str, float] = defaultdict(float)

    def train_step_seconds(indices: np.ndarray) -> float:
        started = time.perf_counter()
        trainer.train_step([indices], stats)
        return time.perf_counter() - started

    log(f"profile: {len(timed)} batches, each by phase and through Trainer.train_step")
    phases, real = [], []
    for i, indices in enumerate(timed):
        if i % 2:
            real.append(train_step_seconds(indices))
        phases.append(step_phases(trainer, indices, WARM_STEPS + i + 1))
        if not i % 2:
            real.append(train_step_seconds(indices))
    log(f"profile: torch.profiler over {PROFILED_STEPS} steps")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        profiled_ms = 1000 * sum(train_step_seconds(indices) for indices in timed[:PROFILED_STEPS]) / PROFILED_STEPS
    events = prof.key_averages()
    operators = sorted((e for e in events if e.key.startswith("aten::")), key=lambda e: -e.self_cpu_time_total)
    backward = sorted((e for e in events if e.key.startswith(BACKWARD_EVENT)), key=lambda e: -e.cpu_time_total)
    in_aten_ms = sum(event.self_cpu_time_total for event in operators) / 1000 / PROFILED_STEPS

    def per_step(microseconds: float) -> float:
        return microseconds / 1000 / PROFILED_STEPS

    train = trainer.batches.train_data
    pad = padding_of(train.src.lengths + 1, train.tgt.lengths + 1, timed)
    ms = {name: 1000 * statistics.fmean(p[name] for p in phases) for name in PHASES}
    total, real_ms = sum(ms.values()), 1000 * statistics.fmean(real)
    precision = "" if amp == "off" else f", {amp}"
    heading = f"Where a step's time goes (ordo, {corpus.title.split()[0]}, {max_tokens:,} tokens{precision})"
    lines = [f"command: `{command}` ({time.strftime('%Y-%m-%d')}; torch {torch.__version__}, {threads} threads)", "",
             f"CPU: {cpu_description()}", "",
             (f"{len(timed)} training batches of epoch 1 (after {WARM_STEPS} untimed), the recipe's model and "
              f"optimiser; {pad.tgt_tokens_per_batch:,.0f} target tokens per batch; padded positions: source "
              f"{100 * pad.src_padding:.1f}%, target {100 * pad.tgt_padding:.1f}%; the encoder runs on the real "
              f"tokens alone in {100 * pad.packed:.0f}% of these batches. Each batch is taken apart by phase "
              "(tensor hooks mark where the backward pass reaches the decoder's and the encoder's outputs) and also "
              "run through Trainer.train_step, alternately. Timings on shared cores: the shares matter more than "
              "the milliseconds."), "",
             "| phase | ms/step | share |", "|---|---:|---:|"]
    lines += [f"| {PHASES[name]} | {ms[name]:.1f} | {100 * ms[name] / total:.1f}% |" for name in PHASES]
    lines += [f"| **sum** | **{total:.1f}** | 100% |", f"| Trainer.train_step on the same batches | {real_ms:.1f} | |",
              "",
              (f"torch.profiler over {PROFILED_STEPS} of these steps through Trainer.train_step ({profiled_ms:.1f} "
               f"ms/step under the profiler): {in_aten_ms:.1f} ms/step inside ATen operators, the remaining "
               f"{profiled_ms - in_aten_ms:.1f} ms/step ({100 * (1 - in_aten_ms / profiled_ms):.1f}%) in Python, "
               "dispatch, autograd bookkeeping and the profiler itself. Busiest operators by self time, and the "
               "backward functions by their total time:"), "",
              "| operator | calls/step | ms/step | share of the profiled step |", "|---|---:|---:|---:|"]
    lines += [f"| `{e.key}` | {e.count / PROFILED_STEPS:.0f} | {per_step(e.self_cpu_time_total):.1f} | "
              f"{100 * per_step(e.self_cpu_time_total) / profiled_ms:.1f}% |" for e in operators[:12]]
    lines += ["", "| backward function | calls/step | ms/step | share of the profiled step |", "|---|---:|---:|---:|"]
    lines += [f"| `{e.key[len(BACKWARD_EVENT):]}` | {e.count / PROFILED_STEPS:.0f} | {per_step(e.cpu_time_total):.1f} | "
              f"{100 * per_step(e.cpu_time_total) / profiled_ms:.1f}% |" for e in backward[:8]]
    decoder = ms["decoder"] + ms["decoder_backward"]
    lines += ["", (f"Decoder forward + backward: {decoder:.1f} ms/step ({100 * decoder / total:.0f}% of the step), "
                   f"{100 * pad.tgt_padding:.1f}% of its positions padding: at most ~{pad.tgt_padding * decoder:.1f} "
                   f"ms/step ({100 * pad.tgt_padding * decoder / total:.1f}% of the step) goes to padded positions, "
                   "less the attention between positions, which packing the real tokens could not remove.")]
    return heading, "\n".join(lines)


# -- output ----------------------------------------------------------------------------------------------------

COMPARISON_HEADING = "Training speed against fairseq on real data"


def write_section(path: Path, heading: str, body: str) -> None:
    """Replace the ``## heading`` section of the markdown file ``path`` with ``body``, or append it; the other
    sections stay as they are."""
    parts = re.split(r"(?m)^(?=## )", path.read_text(encoding="utf-8") if path.exists() else "")
    new = f"## {heading}\n\n{body.strip()}\n"
    found = [i for i, part in enumerate(parts) if part.split("\n", 1)[0] == f"## {heading}"]
    if found:
        parts[found[0]] = new
    else:
        parts.append(new)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as handle:
        handle.write("\n".join(part.strip("\n") + "\n" for part in parts if part.strip()))


def main() -> None:
    """Prepare the corpora, then run the comparison (or, with ``--profile``, the step profile) and write it."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", nargs="+", choices=list(CORPORA), default=list(CORPORA))
    parser.add_argument("--max-tokens", nargs="+", type=int, default=[3000, 4096])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=300, help="measured updates per run")
    parser.add_argument("--warmup", type=int, default=50, help="updates per run before the measured ones")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--fairseq-venv", type=Path, default=ROOT.parent / "fairseq_peer" / "venv",
                        help="a venv with fairseq (the stage 1 of ../shared/bench/peer_multi30k.sh makes one)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "fairseq_real",
                        help="prepared data (kept and reused) and the runs")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fairseq_real.md")
    parser.add_argument("--profile", action="store_true",
                        help="time where ordo's training step goes instead (first corpus, first --max-tokens)")
    parser.add_argument("--profile-batches", type=int, default=30)
    parser.add_argument("--ordo-amp", choices=["off", "bf16"], default="off",
                        help="ordo's train.amp (fairseq stays in float32); bf16 pays on CPUs with AVX512_BF16 or AMX")
    args = parser.parse_args()
    if min(args.warmup, args.updates, args.rounds, args.profile_batches) < 1:
        parser.error("--warmup, --updates, --rounds and --profile-batches must be at least 1")
    command = shlex.join(["python", "bench/fairseq_real.py", *sys.argv[1:]])
    work = args.work.resolve()
    if args.profile:
        corpus = CORPORA[args.corpora[0]]
        data_dir = prepare_ordo(corpus, args.data_root, work)
        heading, body = profile_section(corpus, data_dir, args.max_tokens[0], args.threads, args.profile_batches,
                                        command, args.ordo_amp)
        write_section(args.out, heading, body)
        print(f"## {heading}\n\n{body}")
        return
    results = []
    for name in args.corpora:
        corpus = CORPORA[name]
        data_dir = prepare_ordo(corpus, args.data_root, work)
        bin_dir = prepare_fairseq(corpus, data_dir, args.fairseq_venv, work)
        done = []
        for max_tokens in args.max_tokens:
            setting = Setting(corpus, data_dir, bin_dir, max_tokens, args.warmup, args.updates, args.threads,
                              work / name / str(max_tokens), args.ordo_amp)
            setting.work.mkdir(parents=True, exist_ok=True)
            padding = padding_both(setting, args.fairseq_venv)
            done.append(SettingResult(setting, compare(setting, args.rounds, args.fairseq_venv), padding))
        results.append(CorpusResult(corpus, vocabulary_sizes(data_dir, bin_dir), done))
    body = comparison_section(command, args.fairseq_venv, args.threads, args.ordo_amp, results)
    heading = comparison_heading(args.ordo_amp)
    write_section(args.out, heading, body)
    print(f"## {heading}\n\n{body}")


if __name__ == "__main__":
    main()
