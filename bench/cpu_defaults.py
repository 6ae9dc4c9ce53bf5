"""Whether ordo's CPU defaults win on this CPU (issue 44): ``cpu_gemm`` = blas, onednn and auto, and bf16
training, per preset.

For each preset (``tiny``, ``small``, ``base``: the Multi30k recipe's ``train.yaml`` with ``model.preset`` set,
so its dropout and shared embeddings, 3,000-token real batches), and each backend, in rounds that alternate
the backends' order:

- training: ``ordo train`` from scratch with ``train.cpu_gemm=BACKEND`` for ``--warmup`` + N updates (N per
  preset, ``--updates``), in float32 (``train.amp=off``) for blas and onednn, under bf16 autocast
  (``train.amp=bf16``) for ``bf16`` (``--bf16``: by default where the CPU has native bf16, ``avx512_bf16`` or
  ``amx_bf16``; elsewhere it is emulated and slow), and with both defaults (``train.amp=auto``) for auto; target
  tokens/s over the updates after the warm-up (``train.log``'s interval lines,
  weighted by the updates' tokens, as ``bench/fairseq_real.py`` reads them), and the process's peak resident
  memory (``ru_maxrss`` from ``wait4``);
- beam search: the preset's model from the first backend's training run (so hardly trained: its hypotheses
  mostly run to the length limit, 1.2 x source + 10 pieces, which makes every search long) translates the first
  ``--sentences`` sentences of Multi30k test2016 in one call (whole file, beam 5) and the first
  ``--single`` one at a time, with ``decode.cpu_gemm=BACKEND``, in a process of its own: sentences/s of each
  and the process's peak resident memory. The file is the process's first translation, timed whole, as a user's
  ``ordo translate`` pays it: each backend's one-off costs (oneDNN's packed weights and kernels, auto's timing)
  fall inside it (an untimed warm-up sentence before it hid the fixed backends' packing, up to 0.2 s at the base
  preset, but not auto's timing of the file's row counts); the sentences one at a time follow in the warm process.
- beam search in one warm process (``--warm-rounds N``): the same model, file and sentences, each backend once
  untimed (oneDNN's weights packed, auto's keys decided), then N rounds with the three back to back, the order
  rotating (for the sentences one at a time, from sentence to sentence): a server's or a long file's steady
  state, and a comparison that a slow spell of the machine touches alike.

Then, per product (``--products``, in a process of its own): each layer shape of each preset (the output
projection at the prepared vocabulary's size) at 1, 5 and 200 rows (one row, a beam of 5, a file's batch of
beams), without gradients: BLAS, oneDNN on the packed weight and oneDNN on the plain weight (µs, the median of 3
alternating rounds), the backend ``cpu_gemm: auto``'s timing picks in decoding (``ordo.gemm.KeyTiming``), and
the time to pack the whole model's weights for oneDNN: the figures behind ``ordo/gemm.py``'s reasoning.

Every process runs with ``OMP_NUM_THREADS`` = ``MKL_NUM_THREADS`` = ``--threads``. ``auto`` is measured as a run
of its own (not copied from the choice it resolves to). The report gives each figure per round, the best
round's (other work on the machine only slows a run down), and ``auto`` against the better fixed choice (blas
and onednn, and in training bf16; speed: auto / best; memory: auto / lowest), from the best rounds and round by round: a round runs the three
back to back, so the median of its ratios is the figure a slow spell of the machine (other virtual machines on
a shared host) disturbs least; ``auto`` is marked behind where the 95% interval of the rounds' mean ratio lies
wholly more than 5% behind, level where none of it does, and unsettled (with the rounds that would settle it)
between.
``--decode-rounds`` gives the beam search more rounds than training (its runs are short, and cheap).

``--pause FILE``: process-group ids, one a line, that are stopped (SIGSTOP) for each measured process and
continued (SIGCONT) right after it, also on an error or a signal, so that other work on the machine waits only
for one run at a time.

usage: python bench/cpu_defaults.py [--presets tiny small base] [--updates 200 60 16] [--rounds 1] [--decode-rounds N]
           [--warm-rounds 6] [--out bench/results/cpu_defaults.md] [--pause PIDFILE] [--no-products] [--no-bf16]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scipy import stats

if not __package__:  # run as `python bench/NAME.py`: the repository root, not bench/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.fairseq_real import (
    CORPORA,
    ROOT,
    log,
    measured_rate,
    ordo_intervals,
    ordo_update_tokens,
    prepare_ordo,
    thread_env,
)

BACKENDS = ("blas", "onednn", "auto")
BF16 = "bf16"  # the training runs under bf16 autocast (--bf16): a choice of train.amp's, beside cpu_gemm's
VECTOR_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "avx512_vnni", "avx_vnni",
                "amx_tile", "amx_bf16", "amx_int8")  # the /proc/cpuinfo flags that decide CPU kernels' speed
NOISE = 0.05  # auto may trail the better backend by this share


@dataclass
class Figures:
    """One backend's measurements at one preset, a value per round."""

    train_rate: list[float] = field(default_factory=list)  # target tokens/s
    train_mb: list[float] = field(default_factory=list)  # peak resident MB of the training process
    file_rate: list[float] = field(default_factory=list)  # sentences/s, whole file in one call
    single_rate: list[float] = field(default_factory=list)  # sentences/s, one sentence per call
    decode_mb: list[float] = field(default_factory=list)  # peak resident MB of the translating process
    warm_file_rate: list[float] = field(default_factory=list)  # sentences/s, whole file, in one warm process
    warm_single_rate: list[float] = field(default_factory=list)  # sentences/s, one per call, in that process


# -- pausing other work -----------------------------------------------------------------------------------------


def paused_groups(pid_file: Path | None) -> list[int]:
    """The process-group ids listed in ``pid_file`` (none without one, or for a missing file)."""
    if pid_file is None or not pid_file.exists():
        return []
    return [int(line) for line in pid_file.read_text().split() if line.strip().isdigit()]


def signal_groups(groups: Sequence[int], signal_number: int) -> None:
    """Send ``signal_number`` to each process group of ``groups`` that still exists."""
    for group in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal_number)


@contextlib.contextmanager
def others_paused(pid_file: Path | None) -> Iterator[None]:
    """Stop the process groups of ``pid_file`` for the block and continue them after it, whatever happens (a
    SIGTERM or SIGHUP to this script continues them too, then ends it)."""
    groups = paused_groups(pid_file)
    handlers = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGHUP)}

    def resume_and_exit(number: int, _frame: object) -> None:
        signal_groups(groups, signal.SIGCONT)
        sys.exit(128 + number)

    for number in handlers:
        signal.signal(number, resume_and_exit)
    signal_groups(groups, signal.SIGSTOP)
    try:
        yield
    finally:
        signal_groups(groups, signal.SIGCONT)
        for number, handler in handlers.items():
            signal.signal(number, handler)


def run_measured(command: Sequence[str], log_path: Path, threads: int, pid_file: Path | None) -> float:
    """Run ``command`` from the repository root (output in ``log_path``) with others paused; returns its peak
    resident memory in MB.

    Raises:
        RuntimeError: when it fails, with the log's tail.
    """
    env = dict(os.environ) | thread_env(threads)
    with open(log_path, "w", encoding="utf-8") as handle, others_paused(pid_file):
        process = subprocess.Popen(list(command), cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        tail = log_path.read_text(encoding="utf-8").splitlines()[-20:]
        raise RuntimeError(f"{shlex.join(command)} exited with {process.returncode} (log {log_path}):\n"
                           + "\n".join(tail))
    return usage.ru_maxrss / 1024


# -- the measurements --------------------------------------------------------------------------------------------


def train_command(data_dir: Path, run_dir: Path, preset: str, backend: str, steps: int, interval: int,
                  threads: int) -> list[str]:
    """``ordo train`` of the Multi30k recipe at ``preset`` on ``backend`` (blas or onednn in float32, bf16 under
    bf16 autocast, auto with both defaults) for ``steps`` updates, logging every ``interval``; no validation before
    the end, none of its BLEU, no progress bar."""
    amp = {BF16: "bf16", "auto": "auto"}.get(backend, "off")
    overrides = {"model.preset": preset, "train.max_steps": steps, "train.max_minutes": 0, "train.log_every": interval,
                 "train.valid_every": steps + 1, "train.valid_bleu": "false", "train.progress": "false",
                 "train.threads": threads, "train.keep_last": 1, "train.amp": amp,
                 "train.cpu_gemm": "auto" if backend == BF16 else backend}
    sets = [arg for key, value in overrides.items() for arg in ("--set", f"{key}={value}")]
    return [sys.executable, "-m", "ordo", "train", str(ROOT / "recipes" / "multi30k" / "train.yaml"),
            "--data", str(data_dir), "--out", str(run_dir), *sets]


def train_once(args: argparse.Namespace, data_dir: Path, preset: str, backend: str, updates: int,
               tokens: list[int]) -> tuple[float, float]:
    """One training run (module docstring): (target tokens/s after the warm-up, peak MB)."""
    work = args.work / preset
    run_dir = work / backend
    if run_dir.exists():  # an old run directory would be resumed
        shutil.rmtree(run_dir)
    work.mkdir(parents=True, exist_ok=True)
    interval = args.interval
    command = train_command(data_dir, run_dir, preset, backend, args.warmup + updates, interval, args.threads)
    megabytes = run_measured(command, work / f"train_{backend}.out", args.threads, args.pause)
    intervals = ordo_intervals(run_dir / "train.log")
    measured = [(sum(tokens[end - interval:end]), rate) for end, rate in intervals.items() if end > args.warmup]
    return measured_rate(measured), megabytes


def translate_once(args: argparse.Namespace, run_dir: Path, backend: str) -> tuple[float, float, float]:
    """One translating process (module docstring): (whole-file sentences/s, one-at-a-time sentences/s, peak MB)."""
    result = args.work / "translate.json"
    command = [sys.executable, str(Path(__file__).resolve()), "--translate-child", str(run_dir), backend,
               str(args.sentences), str(args.single), str(args.test_src), str(result)]
    megabytes = run_measured(command, args.work / f"translate_{backend}.out", args.threads, args.pause)
    rates = json.loads(result.read_text())
    return rates["file"], rates["single"], megabytes


def source_lines(source: str, count: int) -> list[str]:
    """The first ``count`` lines of the gzipped ``source``."""
    import gzip

    with gzip.open(source, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for _, line in zip(range(count), handle)]


def timed_rates(run: Any, lines: list[str], sentences: int, single: int, backend: str) -> tuple[float, float]:
    """Beam-5 sentences/s on ``backend`` over the first ``sentences`` lines in one call and the first ``single``
    one per call."""
    file_rate = sentences / translation_seconds(run, lines[:sentences], backend)
    return file_rate, single / sum(translation_seconds(run, [line], backend) for line in lines[:single])


def translate_child(run_dir: str, backend: str, sentences: int, single: int, source: str, result: str) -> None:
    """The translating process: load the run's last checkpoint, translate (module docstring) and write the rates
    as JSON to ``result``."""
    from ordo import api

    run = api.load_run(run_dir, "last", device="cpu")
    file_rate, single_rate = timed_rates(run, source_lines(source, max(sentences, single)), sentences, single, backend)
    Path(result).write_text(json.dumps({"file": file_rate, "single": single_rate}))


def warm_child(run_dir: str, sentences: int, single: int, rounds: int, source: str, result: str) -> None:
    """The warm process: load the run's last checkpoint once per backend, translate with every backend once
    untimed (oneDNN packs its weights, auto decides its keys), then ``rounds`` rounds: the file by each backend in
    an order that rotates, then the sentences one at a time, each by the three backends back to back in an order
    that rotates from sentence to sentence, so that a slow spell of the machine touches the three alike
    (interleaved by round, not by sentence, the rounds' ratios spread 2-4 times as wide at the base preset); the
    rates per backend, a value per round, as JSON to ``result``. Each backend translates with its own copy of
    the run: a loaded run's layers hold oneDNN's packed weight in place of their own while their products run on
    it (``ordo.decoding.packed``), so one copy shared by the backends would unpack and pack its layers at every
    change of backend, a cost no single-backend process pays, which the backend after oneDNN's turn paid (0.81
    of BLAS's speed for auto at the base preset on an Intel Xeon where auto chose BLAS, 0.71 for oneDNN)."""
    from ordo import api

    runs = {backend: api.load_run(run_dir, "last", device="cpu") for backend in BACKENDS}
    lines = source_lines(source, max(sentences, single))
    for backend in BACKENDS:
        timed_rates(runs[backend], lines, sentences, single, backend)
    rates: dict[str, dict[str, list[float]]] = {backend: {"file": [], "single": []} for backend in BACKENDS}
    turn = 0
    for index in range(rounds):
        for backend in rotated(BACKENDS, index):
            rates[backend]["file"].append(sentences / translation_seconds(runs[backend], lines[:sentences], backend))
        seconds = dict.fromkeys(BACKENDS, 0.0)
        for line in lines[:single]:
            for backend in rotated(BACKENDS, turn):
                seconds[backend] += translation_seconds(runs[backend], [line], backend)
            turn += 1
        for backend in BACKENDS:
            rates[backend]["single"].append(single / seconds[backend])
    Path(result).write_text(json.dumps(rates))


def translation_seconds(run: Any, lines: list[str], backend: str) -> float:
    """Seconds of one beam-5 translation of ``lines`` in one call on ``backend``."""
    start = time.perf_counter()
    run.translate(lines, beam_size=5, cpu_gemm=backend)
    return time.perf_counter() - start


def rotated(backends: Sequence[str], index: int) -> list[str]:
    """The backends in round ``index``'s order: each round starts one further along."""
    start = index % len(backends)
    return [*backends[start:], *backends[:start]]


PRODUCT_ROWS = (1, 5, 200)


def layer_shapes(preset: str, vocab: int) -> list[tuple[str, int, int, int]]:
    """(layer, out features, in features, how many in the model) of a Transformer preset's linear layers."""
    from ordo.config import PRESETS

    d, ffn = PRESETS[preset]["d_model"], PRESETS[preset]["ffn_dim"]
    encoders, decoders = PRESETS[preset]["encoder_layers"], PRESETS[preset]["decoder_layers"]
    return [("self-attention QKV", 3 * d, d, encoders + decoders),
            ("attention out, cross-attention Q", d, d, encoders + 3 * decoders),
            ("cross-attention KV", 2 * d, d, decoders), ("FFN in", ffn, d, encoders + decoders),
            ("FFN out", d, ffn, encoders + decoders), ("output projection", vocab, d, 1)]


def time_call(call: Callable[[], object], budget: float = 0.02) -> float:
    """Seconds per call of ``call``, over as many calls as fill ``budget`` seconds (at least 3)."""
    start, count = time.perf_counter(), 0
    while count < 3 or time.perf_counter() - start < budget:
        call()
        count += 1
    return (time.perf_counter() - start) / count


def products_child(presets: list[str], vocab: int, result: str) -> None:
    """The per-product process (module docstring): writes a JSON list of rows to ``result``."""
    import torch
    import torch.nn.functional as F

    from ordo import gemm

    torch.manual_seed(0)
    rows_out: list[dict[str, object]] = []
    for preset in presets:
        pack_seconds = 0.0
        for layer, out_features, in_features, count in layer_shapes(preset, vocab):
            weight, bias = torch.randn(out_features, in_features), torch.randn(out_features)
            start = time.perf_counter()
            packed = gemm._pack(weight)
            pack_seconds += (time.perf_counter() - start) * count
            for rows in PRODUCT_ROWS:
                x = torch.randn(rows, in_features)
                calls = {"blas": functools.partial(F.linear, x, weight, bias),
                         "packed": functools.partial(gemm._onednn_linear, x, packed, bias),
                         "plain": functools.partial(gemm._onednn_linear, x, weight, bias)}
                for call in calls.values():
                    call()  # oneDNN builds its kernel for the shape
                times: dict[str, list[float]] = {name: [] for name in calls}
                for _ in range(3):
                    for name, call in calls.items():
                        times[name].append(time_call(call))
                pick = auto_choice(x, weight, bias)
                rows_out.append({"preset": preset, "layer": f"{layer} ({out_features} x {in_features})", "rows": rows,
                                 **{name: statistics.median(values) * 1e6 for name, values in times.items()},
                                 "auto": pick})
        rows_out.append({"preset": preset, "pack_ms": pack_seconds * 1e3})
    Path(result).write_text(json.dumps(rows_out))


def auto_choice(x: Any, weight: Any, bias: Any) -> str:
    """The backend ``cpu_gemm: auto`` chooses in decoding for the product x W^T + b (tensors): for a beam's rows the
    product repeated, timed by ``ordo.gemm.KeyTiming`` as a translation's products are, until its key is decided;
    above them the training rule's backend, untimed."""
    import torch

    from ordo import gemm

    rows = x.size(0)
    if rows > gemm.SMALL_ROW_BUCKET:
        return f"{gemm.auto_backend(weight)} (the rule)"
    key = (weight.size(0), weight.size(1), rows, torch.get_num_threads())
    gemm._choices.pop(key, None)
    with gemm.cpu_gemm("auto", timed=True), torch.inference_mode():
        while key not in gemm._choices:
            gemm.linear(x, weight, bias)
    return gemm._choices[key]


def product_table(args: argparse.Namespace, data_dir: Path) -> list[str]:
    """The per-product table (module docstring), measured in a process of its own with others paused."""
    result = args.work / "products.json"
    vocab = len((data_dir / "spm.vocab").read_text(encoding="utf-8").splitlines())
    command = [sys.executable, str(Path(__file__).resolve()), "--products-child", str(vocab), str(result),
               *args.presets]
    log(f"products (load {load_average()})")
    run_measured(command, args.work / "products.out", args.threads, args.pause)
    lines = ["**Products** without gradients, one at a time (µs; the median of 3 alternating rounds):", "",
             "| preset | layer (out x in) | rows | BLAS | oneDNN packed | oneDNN plain | auto's timing picks |",
             "|---|---|---:|---:|---:|---:|---|"]
    packing = []
    for row in json.loads(result.read_text()):
        if "pack_ms" in row:
            packing.append(f"{row['preset']} {row['pack_ms']:.1f} ms")
            continue
        lines.append(f"| {row['preset']} | {row['layer']} | {row['rows']} | {row['blas']:,.0f} | "
                     f"{row['packed']:,.0f} | {row['plain']:,.0f} | {row['auto']} |")
    return lines + ["", f"Packing all of a model's weights for oneDNN: {', '.join(packing)}.", ""]


def measure_preset(args: argparse.Namespace, data_dir: Path, preset: str, updates: int) -> dict[str, Figures]:
    """Every backend's figures at ``preset``: training rounds (bf16's too, with ``--bf16``), then translation
    rounds, each round's backends in turn, the order rotating from round to round."""
    trained = [*args.backends, *([BF16] if args.bf16 else [])]
    figures = {backend: Figures() for backend in trained}
    tokens = ordo_update_tokens(data_dir, 3000, 1, args.warmup + updates)
    orders = [rotated(args.backends, index) for index in range(max(args.rounds, args.decode_rounds))]
    for index in range(args.rounds):
        for backend in rotated(trained, index):
            log(f"{preset} training, round {index + 1}: {backend} (load {load_average()})")
            rate, megabytes = train_once(args, data_dir, preset, backend, updates, tokens)
            figures[backend].train_rate.append(rate)
            figures[backend].train_mb.append(megabytes)
    model = args.work / preset / orders[0][0]
    for index, order in enumerate(orders[:args.decode_rounds]):
        for backend in order:
            log(f"{preset} beam search, round {index + 1}: {backend} (load {load_average()})")
            file_rate, single_rate, megabytes = translate_once(args, model, backend)
            figures[backend].file_rate.append(file_rate)
            figures[backend].single_rate.append(single_rate)
            figures[backend].decode_mb.append(megabytes)
    if args.warm_rounds:
        warm_rounds(args, model, figures)
    return figures


def warm_rounds(args: argparse.Namespace, run_dir: Path, figures: dict[str, Figures]) -> None:
    """The warm process's rounds (:func:`warm_child`), each backend's rates added to its figures."""
    result = args.work / "warm.json"
    command = [sys.executable, str(Path(__file__).resolve()), "--warm-child", str(run_dir), str(args.sentences),
               str(args.single), str(args.warm_rounds), str(args.test_src), str(result)]
    log(f"{run_dir.parent.name} beam search, {args.warm_rounds} rounds in one warm process (load {load_average()})")
    run_measured(command, args.work / "warm.out", args.threads, args.pause)
    for backend, rates in json.loads(result.read_text()).items():
        figures[backend].warm_file_rate.extend(rates["file"])
        figures[backend].warm_single_rate.extend(rates["single"])


# -- the report ------------------------------------------------------------------------------------------------


def load_average() -> str:
    """The 1, 5 and 15-minute load averages."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def cpu_lines() -> list[str]:
    """The CPU's model, vendor, family and model numbers, its vector extensions, torch's kernel level and what
    ``train.amp: auto`` and ``cpu_gemm: auto`` resolve to here."""
    import torch

    from ordo import gemm
    from ordo.precision import amp_dtype, native_bf16

    info = gemm.cpuinfo()
    flags = set(info.get("flags", "").split())
    found = " ".join(flag for flag in VECTOR_FLAGS if flag in flags) or "none"
    model = " ".join(info.get("model name", "unknown CPU").split())
    cpu = (f"CPU: {model} ({info.get('vendor_id', 'vendor unknown')}, family {info.get('cpu family', '?')} model "
           f"{info.get('model', '?')}), {os.cpu_count()} logical CPUs; vector extensions: {found}; PyTorch "
           f"{torch.__version__}, kernels {torch.backends.cpu.get_cpu_capability()}")
    auto = (f"`cpu_gemm: auto` resolves here to {gemm.resolve('auto')} in training ({gemm.auto_reason()}); in "
            f"decoding it times both backends per product shape for a beam's rows (up to {gemm.SMALL_ROW_BUCKET}) "
            "and keeps the rule above (the per-product table)")
    bf16 = amp_dtype("auto", torch.device("cpu")) is not None
    amp = (f"`train.amp: auto` trains here in {'bf16, where `cpu_gemm` does not apply' if bf16 else 'float32'} "
           f"(native bf16: {'yes' if native_bf16() else 'no'})")
    return [cpu, auto, amp]


def best_round(values: Sequence[float], higher_is_better: bool) -> float:
    """The best of the rounds' ``values`` (the highest speed, the lowest memory): other work on the machine only
    slows a run down, so the best round is the one it disturbed least."""
    return max(values) if higher_is_better else min(values)


def cell(values: Sequence[float], form: str, higher_is_better: bool) -> str:
    """The best round of ``values``, with every round's value in brackets when there are several; ``-`` where
    there are none (bf16 in decoding)."""
    if not values:
        return "-"
    text = form.format(best_round(values, higher_is_better))
    return text if len(values) == 1 else f"{text} ({' / '.join(form.format(v) for v in values)})"


def fixed_choices(figures: dict[str, Figures], name: str) -> list[str]:
    """The fixed choices measured for the figure ``name``, that auto is held against: blas and onednn, and in
    training bf16 where it ran."""
    return [backend for backend in figures if backend != "auto" and getattr(figures[backend], name)]


def auto_against_best(figures: dict[str, Figures], name: str, higher_is_better: bool) -> str:
    """``auto``'s best round over the best fixed choice's (:func:`fixed_choices`) for the figure ``name``."""
    better = max if higher_is_better else min
    best = better(best_round(getattr(figures[backend], name), higher_is_better)
                  for backend in fixed_choices(figures, name))
    return f"{best_round(getattr(figures['auto'], name), higher_is_better) / best:.2f}"


def ratio_verdict(ratios: Sequence[float], higher_is_better: bool) -> str:
    """Whether auto trails the better backend by more than :data:`NOISE`, from the rounds' ``ratios`` (auto / best):
    their geometric mean and its 95% t-interval (over the logarithms: a ratio and its inverse weigh alike), and
    **behind** where the whole interval trails by more than NOISE, ``level`` where none of it does, else
    ``unsettled``, with the rounds at this spread that would put the interval on one side of the line."""
    if len(ratios) < 2:
        return "one round: no interval"
    logs = [math.log(ratio) for ratio in ratios]
    centre, spread = statistics.fmean(logs), statistics.stdev(logs)
    half = float(stats.t.ppf(0.975, len(logs) - 1)) * spread / math.sqrt(len(logs))
    low, high = math.exp(centre - half), math.exp(centre + half)
    line = math.log(1 - NOISE) if higher_is_better else math.log(1 + NOISE)
    trails = (lambda log_ratio: log_ratio < line) if higher_is_better else (lambda log_ratio: log_ratio > line)
    interval = f"mean {math.exp(centre):.2f} (95% CI {low:.2f}-{high:.2f})"
    if trails(centre + half) and trails(centre - half):
        return f"{interval} **behind**"
    if not trails(centre + half) and not trails(centre - half):
        return f"{interval} level"
    distance = abs(centre - line)
    needed = math.ceil((1.96 * spread / distance) ** 2) if distance > 0 else None
    more = f"about {needed} rounds would settle it" if needed and needed <= 100 else "it sits on the line"
    return f"{interval} unsettled: {more}"


def auto_per_round(figures: dict[str, Figures], name: str, higher_is_better: bool, same_code: str | None) -> str:
    """In each round, ``auto``'s figure over the best fixed choice's (:func:`fixed_choices`) in the same round
    (they ran back to back, so a slow spell of the machine touches them alike): the median and range of those
    ratios, and whether auto is behind by more than :data:`NOISE` (memory: above by more) by :func:`ratio_verdict`.
    Where auto runs the code of a fixed choice (``same_code``: training, whose rules pick one per CPU), the ratio
    to the best is that choice's trade, and auto's median ratio to that choice's own figure, the machine's noise,
    is given beside it."""
    rounds = zip(*(getattr(figures[backend], name) for backend in fixed_choices(figures, name)),
                 getattr(figures["auto"], name))
    better = max if higher_is_better else min
    ratios = sorted(values[-1] / better(values[:-1]) for values in rounds)
    median = statistics.median(ratios)
    spread = f" [{ratios[0]:.2f}-{ratios[-1]:.2f}]" if len(ratios) > 1 else ""
    if same_code:
        own = statistics.median(auto / fixed for fixed, auto in zip(getattr(figures[same_code], name),
                                                                   getattr(figures["auto"], name)))
        return f"{median:.2f}{spread} (auto trains on {same_code} here, as its code: {own:.2f} of its figure, noise)"
    return f"{median:.2f}{spread}; {ratio_verdict(ratios, higher_is_better)}"


FIGURES = (("train_rate", "train tgt tok/s", "{:,.0f}", True), ("train_mb", "train peak MB", "{:,.0f}", False),
           ("file_rate", "beam-5 sent/s (file)", "{:.1f}", True),
           ("single_rate", "beam-5 sent/s (one at a time)", "{:.1f}", True),
           ("warm_file_rate", "beam-5 sent/s (file), warm process", "{:.1f}", True),
           ("warm_single_rate", "beam-5 sent/s (one at a time), warm process", "{:.1f}", True),
           ("decode_mb", "beam-5 peak MB", "{:,.0f}", False))


WORKLOADS = (("training", "train_rate", "train_mb"), ("file", "file_rate", "decode_mb"),
             ("one at a time", "single_rate", "decode_mb"))  # (name, speed figure, memory figure)


def median_ratio(figures: dict[str, Figures], backend: str, name: str) -> float:
    """The median over rounds of ``backend``'s figure ``name`` over auto's in the same round."""
    return statistics.median(ours / auto for ours, auto in zip(getattr(figures[backend], name),
                                                                 getattr(figures["auto"], name)))


def dominating(figures: dict[str, Figures], speed: str, memory: str, same_code: str | None) -> str:
    """The fixed choices that did better than auto at a workload by both its figures at once (round by round, the
    median ratio): better by more than :data:`NOISE` in speed or memory, and within it in the other; ``none``
    where neither did. Where the faster backend holds more memory, no choice wins both: this says whether a user
    who set ``cpu_gemm`` by hand would have had a better trade than auto's. Where auto runs a fixed backend's
    code (``same_code``), it says so instead."""
    if same_code:
        return f"auto is {same_code}"
    better = []
    for backend in fixed_choices(figures, speed):
        speed_ratio, memory_ratio = median_ratio(figures, backend, speed), median_ratio(figures, backend, memory)
        no_worse = speed_ratio >= 1 - NOISE and memory_ratio <= 1 + NOISE
        if no_worse and (speed_ratio > 1 + NOISE or memory_ratio < 1 - NOISE):
            better.append(f"**{backend}** (speed {speed_ratio:.2f}, memory {memory_ratio:.2f} of auto's)")
    return ", ".join(better) or "none"


def preset_table(preset: str, updates: int, figures: dict[str, Figures]) -> list[str]:
    """The markdown table of one preset."""
    backends = list(figures)
    lines = [f"**{preset}** ({updates} measured updates per training run):", "",
             f"| figure | {' | '.join(backends)} | auto / best (best rounds) | auto / best per round |",
             "|---|" + "---:|" * (len(backends) + 2)]
    compared = {"blas", "onednn", "auto"} <= set(figures)
    for name, title, form, higher in FIGURES:
        if not getattr(figures[backends[0]], name):  # not measured (--warm-rounds 0)
            continue
        cells = [cell(getattr(figures[backend], name), form, higher) for backend in backends]
        against = auto_against_best(figures, name, higher) if compared else "-"
        per_round = auto_per_round(figures, name, higher, same_code(name, preset)) if compared else "-"
        lines.append(f"| {title} | {' | '.join(cells)} | {against} | {per_round} |")
    if compared:
        lines += ["", "A fixed choice better than auto in speed or memory and no worse in the other: " + "; ".join(
            f"{workload}: {dominating(figures, speed, memory, same_code(speed, preset))}"
            for workload, speed, memory in WORKLOADS) + "."]
    return lines + [""]


def same_code(name: str, preset: str) -> str | None:
    """The fixed choice whose code auto runs for the figure ``name`` of ``preset``: in training, bf16 where
    ``train.amp: auto`` trains in bf16 on this CPU (:func:`ordo.precision.amp_dtype`), else the backend the
    ``cpu_gemm`` rule gives every one of the preset's layers (:func:`ordo.gemm.auto_backend`); None in decoding,
    where auto times both, and where the rule gives the layers different backends."""
    import torch

    from ordo import gemm
    from ordo.precision import amp_dtype

    if not name.startswith("train"):
        return None
    if amp_dtype("auto", torch.device("cpu")) is not None:
        return BF16
    backends = {gemm.auto_backend(torch.empty(out, inp)) for _, out, inp, _ in layer_shapes(preset, 8000)}
    return backends.pop() if len(backends) == 1 else None


def report(args: argparse.Namespace, command: str, tables: list[str], started: str) -> str:
    """The whole markdown report."""
    setting = (f"Multi30k En→De (the recipe's data and train.yaml, `model.preset` set), 3,000-token batches, "
               f"{args.warmup} warm-up updates per run, {args.threads} threads, {args.rounds} round(s) of training "
               f"and {args.decode_rounds} of beam search, each in a process of its own, and {args.warm_rounds} of beam "
               f"search in one warm process per preset, the backends back to back (one at a time: sentence by "
               f"sentence) (\"warm process\"); the best round "
               f"of each (other work only slows a run; each round's figure in brackets); beam 5 over the first "
               f"{args.sentences} sentences of test2016 in one call and the first {args.single} one at a time, by "
               f"each preset's barely trained model (hypotheses "
               f"to the length limit); bf16 is training under bf16 autocast (`train.amp=bf16`), blas and onednn "
               f"train in float32, auto with the defaults. auto / best: auto's figure over the best fixed choice "
               f"(blas, onednn and, in training, bf16; memory: over the lowest), from each one's best round, and round by round (the backends of a round run back to "
               f"back): the median ratio [range], and the geometric mean with its 95% interval: **behind** where "
               f"the whole interval trails by more than {NOISE:.0%}, level where none of it does, else unsettled. "
               f"Load average at the start {started}, at the end {load_average()}.")
    return "\n".join(["## CPU defaults: cpu_gemm blas, onednn and auto, and bf16 training, per preset", "", f"command: `{command}`", "",
                      *cpu_lines(), "", setting, "", *tables])


def main() -> None:
    """Measure every preset and backend and write the report."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["tiny", "small", "base"])
    parser.add_argument("--updates", nargs="+", type=int, default=[200, 60, 16],
                        help="measured training updates per run, one number per preset: bf16 and oneDNN runs build "
                             "most of their kernels (0.5 MB each) over their first 100-200 batches, and a shorter "
                             "run understates their peak memory (tiny bf16: 1.07x BLAS's after 20, 1.18x after 250 "
                             "before 64bd058)")
    parser.add_argument("--warmup", type=int, default=4, help="training updates per run before the measured ones")
    parser.add_argument("--interval", type=int, default=2, help="train.log_every; divides --warmup and --updates")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--decode-rounds", type=int, default=None,
                        help="rounds of the beam-search figures (default --rounds): cheaper than training's, and "
                             "its short runs need more rounds to see past other work on the machine")
    parser.add_argument("--sentences", type=int, default=100, help="beam search: sentences in one call")
    parser.add_argument("--single", type=int, default=20, help="beam search: sentences translated one at a time")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "cpu_defaults",
                        help="prepared data (kept and reused) and the runs")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "cpu_defaults.md")
    parser.add_argument("--pause", type=Path, help="a file of process-group ids to stop while each process runs")
    parser.add_argument("--warm-rounds", type=int, default=6,
                        help="rounds of beam search with the backends back to back in one warm process per preset "
                             "(the file and the sentences one at a time each round; 0: none; default %(default)s)")
    parser.add_argument("--no-products", action="store_true", help="leave out the per-product table")
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                        help="also train under bf16 autocast, a column of its own (default: where the CPU has "
                             "native bf16)")
    parser.add_argument("--translate-child", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument("--products-child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--warm-child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warm_child:
        run_dir, sentences, single, rounds, source, result = args.warm_child
        warm_child(run_dir, int(sentences), int(single), int(rounds), source, result)
        return
    if args.translate_child:
        run_dir, backend, sentences, single, source, result = args.translate_child
        translate_child(run_dir, backend, int(sentences), int(single), source, result)
        return
    if args.products_child:
        vocab, result, *presets = args.products_child
        products_child(presets, int(vocab), result)
        return
    if len(args.updates) != len(args.presets):
        parser.error("--updates needs one number per preset")
    if args.warm_rounds and set(args.backends) != set(BACKENDS):
        parser.error("--warm-rounds compares the three backends: leave out --backends")
    args.decode_rounds = args.decode_rounds or args.rounds
    if args.bf16 is None:
        from ordo.precision import native_bf16

        args.bf16 = native_bf16()
    if any(n % args.interval for n in (args.warmup, *args.updates)) or min(args.rounds, args.warmup) < 1:
        parser.error("--interval must divide --warmup and every --updates; --rounds and --warmup at least 1")
    command = shlex.join(["python", "bench/cpu_defaults.py", *sys.argv[1:]])
    started = load_average()
    print("\n".join(cpu_lines()), flush=True)
    args.work = args.work.resolve()
    args.test_src = args.data_root / "multi30k" / "test2016.en.gz"
    data_dir = prepare_ordo(CORPORA["multi30k"], args.data_root, args.work)
    tables = []
    for preset, updates in zip(args.presets, args.updates):
        table = preset_table(preset, updates, measure_preset(args, data_dir, preset, updates))
        print("\n".join(table), flush=True)
        tables += table
    if not args.no_products:
        tables += product_table(args, data_dir)
        print("\n".join(tables[-8:]), flush=True)
    text = report(args, command, tables, started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
