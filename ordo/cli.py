"""The ``ordo`` command line: one verb per workflow step, each a thin layer over :mod:`ordo.api`.

The only module that touches argparse.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import IO, Any

from ordo.errors import ConfigError, InputError, OrdoError, TrainingInterrupted
from ordo.wait_policy import set_wait_policy


def _positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below its minimum 1")
    return value


def _percent_step(text: str) -> int:
    """An argparse type: a step between 1 and 100 percent."""
    value = _positive_int(text)
    if value > 100:
        raise argparse.ArgumentTypeError(f"{value} is above its maximum 100")
    return value


def _number_list(kind: type[int | float]) -> Callable[[str], list[int] | list[float]]:
    """An argparse type: comma-separated finite numbers of ``kind``, e.g. ``10,20,30``."""

    def parse(text: str) -> list[int] | list[float]:
        try:
            numbers = [kind(item) for item in text.split(",")]
            if all(math.isfinite(number) for number in numbers):
                return numbers
        except ValueError:
            pass
        raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__}s, got {text!r}")

    return parse


def _add_prepare(sub: argparse._SubParsersAction) -> None:
    from ordo.choices import choices
    from ordo.data.prepare import PrepareConfig

    p = sub.add_parser("prepare", help="validate a parallel corpus, train SentencePiece, binarize")
    p.add_argument("config", nargs="?", help="YAML file with PrepareConfig keys (flags override it)")
    for flag in ("train-src", "train-tgt", "valid-src", "valid-tgt", "test-src", "test-tgt", "out", "src-lang", "tgt-lang"):
        p.add_argument(f"--{flag}")
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--separate-vocab", action="store_true", help="one SentencePiece model per side")
    p.add_argument("--model-type", choices=choices(PrepareConfig, "model_type"))
    p.add_argument("--max-len", type=int, help="drop training pairs longer than this (pieces)")
    p.add_argument("--max-len-ratio", type=float, help="drop training pairs whose length ratio exceeds this")
    p.add_argument("--skip-empty", action="store_true", help="skip (and count) empty lines instead of failing")
    p.add_argument("--lattice", metavar="SEG,SEG,...",
                   help="source lattices of several segmentations (paper 002): spm:N, chars, jieba, thulac")
    p.add_argument("--vocab-from", metavar="DIR",
                   help="encode with the vocabularies of DIR, a prepared directory, instead of training new ones: "
                        "the output is a shard of DIR's corpus (ordo train --data DIR:OUT)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any PrepareConfig key")


def _add_train(sub: argparse._SubParsersAction) -> None:
    from ordo.choices import choices
    from ordo.config import ModelConfig

    p = sub.add_parser("train", help="train a model (resumes when RUN_DIR holds checkpoints)")
    p.add_argument("config", nargs="?", help="YAML experiment config")
    p.add_argument("--data", help="directory written by `ordo prepare`, or several joined by ':' (shards of one "
                                  "training corpus, one per epoch in turn; the first gives valid and vocabularies)")
    p.add_argument("--preset", choices=choices(ModelConfig, "preset"))
    p.add_argument("--out", required=True, help="run directory (checkpoints, log, config)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="e.g. train.lr=5e-4")


def _add_translate(sub: argparse._SubParsersAction) -> None:
    from ordo.choices import choices
    from ordo.config import DecodeConfig

    p = sub.add_parser("translate", help="translate lines from --input (or stdin) to --output (or stdout)")
    p.add_argument("--model", required=True, help="run directory")
    p.add_argument("--checkpoint", default="best", help="best | last | averaged | a path")
    p.add_argument("--input")
    p.add_argument("--output")
    p.add_argument("--beam", type=int, help="beam size (1: greedy)")
    p.add_argument("--greedy", action="store_true")
    p.add_argument("--nbest", type=int)
    p.add_argument("--lenpen", type=float, help="length penalty exponent")
    p.add_argument("--max-len-a", type=float)
    p.add_argument("--max-len-b", type=int)
    p.add_argument("--min-len", type=int, help="no end of sentence before this many output pieces")
    p.add_argument("--batch-tokens", type=int, help="source tokens per batch")
    p.add_argument("--long-lines", choices=choices(DecodeConfig, "long_lines"),
                   help="a line over the model's length: truncate (default; a warning names the line) or error")
    p.add_argument("--buffer-lines", type=int, default=2000,
                   help="translate the input in chunks of N lines, each written as soon as it is done (default "
                        "2000; 1 when reading a terminal)")
    p.add_argument("--device", default="auto")
    p.add_argument("--int8", action="store_true",
                   help="dynamic int8 quantization of the projections (CPU only; faster, outputs may differ slightly)")
    p.add_argument("--amp", choices=choices(DecodeConfig, "amp"),
                   help="translate under autocast (bf16 on a GPU: faster, outputs may differ slightly); default: the "
                        "run's decode.amp (off unless set)")
    p.add_argument("--cpu-gemm", choices=choices(DecodeConfig, "cpu_gemm"),
                   help="where float32 linear layers multiply on a CPU: oneDNN or torch's BLAS; default: the run's "
                        "decode.cpu_gemm (auto: times both on the first product of each weight shape and row count, "
                        "and keeps the faster)")


def _add_average(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("average", help="average the last N checkpoints of a run")
    p.add_argument("--model", required=True, help="run directory")
    p.add_argument("--last", type=_positive_int, default=5, help="how many of the newest step_N.pt (default 5)")
    p.add_argument("--output", help="default: RUN_DIR/checkpoints/averaged.pt")


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="BLEU/chrF, and significance against a second system")
    p.add_argument("--hyp", required=True)
    p.add_argument("--ref", action="append", required=True, metavar="REF",
                   help="the reference; repeat for several references (e.g. a NIST set's four): BLEU and chrF "
                        "against all of them, each with the --hyp's line count")
    p.add_argument("--compare", help="a second system's output: sacreBLEU's paired bootstrap and approximate "
                                     "randomization over BLEU, chrF and TER, and the sign test over BLEU "
                                     "(one --ref)")
    p.add_argument("--tokenized-bleu", action="store_true", help="also BLEU as multi-bleu.perl computes it")
    p.add_argument("--lowercase", action="store_true")
    p.add_argument("--bootstrap-samples", type=_positive_int, default=1000)
    p.add_argument("--randomization-trials", type=_positive_int, default=10000)
    p.add_argument("--ribes", action="store_true",
                   help="also RIBES (Isozaki et al. 2010, x100) on the tokens: as given with --tokenized-bleu, "
                        "else sacreBLEU's 13a tokens; with --compare, its paired bootstrap too")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="synthetic SVO->SOV pair: prepare, train a tiny model, translate, score")
    p.add_argument("--out", default="demo_run")
    p.add_argument("--minutes", type=float, default=0.0, help="optional cap on training minutes (0: none)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train-size", type=_positive_int, default=20000, help="synthetic training pairs")


def _add_analyze(sub: argparse._SubParsersAction) -> None:
    from ordo.analysis.groups import LENGTH_UNITS

    p = sub.add_parser("analyze", help="does a method help over seeds; the papers' analyses: system tables, "
                                       "robustness, BLEU by length and by word-order difficulty, attention, Sim")
    kinds = p.add_subparsers(dest="analysis", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--src", "--test-src", dest="src", required=True,
                        help="test source (raw text, as ordo translate reads it)")
    common.add_argument("--ref", "--test-ref", dest="ref", required=True, help="test reference")
    common.add_argument("--out", required=True, help="folder for the tables (.md, .tsv), plots and outputs")
    common.add_argument("--tokenized-bleu", action="store_true",
                        help="score with multi-bleu.perl's BLEU (pre-tokenized data); default sacreBLEU")
    runs = argparse.ArgumentParser(add_help=False)
    runs.add_argument("--run", action="append", required=True, metavar="NAME=RUN_DIR",
                      help="a system (repeat; the first is the baseline)")
    runs.add_argument("--checkpoint", default="best", help="best | last | averaged | a path")
    runs.add_argument("--beam", type=_positive_int, help="beam size for every system (default: each run's own)")
    runs.add_argument("--device", default="auto")
    kinds.add_parser("systems", parents=[common, runs],
                     help="BLEU, sign test against the first run, parameters, training and translation speed")
    robust = kinds.add_parser("robustness", parents=[common, runs],
                              help="BLEU against the share of swapped source words (paper 001, 6.5)")
    robust.add_argument("--step", type=_percent_step, default=10, help="percent between swap levels (1..100)")
    robust.add_argument("--seed", type=int, default=1)
    length = kinds.add_parser("length", parents=[common], help="BLEU by source-length group (paper 004, 5.4)")
    length.add_argument("--hyp", action="append", required=True, metavar="NAME=FILE", help="a system's output")
    length.add_argument("--groups", type=_positive_int, default=6, help="groups of about equal size")
    length.add_argument("--bounds", type=_number_list(int),
                        help="explicit upper bounds of the groups in --unit, e.g. 10,20,30")
    length.add_argument("--unit", choices=LENGTH_UNITS, default="words",
                        help="count source words, or characters (unsegmented Chinese, Japanese)")
    order = kinds.add_parser("order", parents=[common],
                             help="BLEU, chrF and RIBES by reordering difficulty (alignment tau of --src/--ref)")
    order.add_argument("--align", required=True,
                       help="Pharaoh links of --src/--ref (ordo align on train+test, or a prepared test.align)")
    order.add_argument("--hyp", action="append", required=True, metavar="NAME=FILE", help="a system's output")
    order.add_argument("--edges", type=_number_list(float),
                       help="bucket upper edges of tau, e.g. --edges=-0.2,0.5 (default: terciles)")
    order.add_argument("--hyp-align", action="append", default=[], metavar="NAME=FILE",
                       help="links of --src to system NAME's output (ordo align --model RUN --src S --tgt HYP): "
                            "how much each system reorders against the reference (order_tau.md)")
    attention = kinds.add_parser("attention", parents=[common],
                                 help="PNG of one sentence's attention matrix per run (paper 003, Figures 1, 4)")
    attention.add_argument("--run", action="append", required=True, metavar="NAME=RUN_DIR")
    attention.add_argument("--line", type=int, default=1, help="1-based line of --src/--ref to show")
    attention.add_argument("--checkpoint", default="best")
    attention.add_argument("--device", default="auto")
    seeds = kinds.add_parser("seeds", help="does a method help? a system against its baseline over seeds: the gain, "
                                           "its 95%% interval and p (t-test over seeds), the gain the seeds can "
                                           "detect, and a verdict (gain, loss, paper's gain ruled out, inconclusive)")
    seeds.add_argument("--ref", "--test-ref", dest="ref", required=True, help="test reference")
    seeds.add_argument("--baseline", action="append", required=True, metavar="FILE",
                       help="the baseline's test output of one seed (repeat: three or more seeds a side)")
    seeds.add_argument("--system", action="append", required=True, metavar="FILE",
                       help="the system's output of one seed (repeat); paired with the baseline "
                            "files in order only for the bootstrap over test sentences reported beside")
    seeds.add_argument("--baseline-run", action="append", default=[], metavar="RUN_DIR",
                       help="the run that wrote each --baseline file, in the same order: the runs' environment.yaml "
                            "must agree in code, torch, device, threads and precision (all or none given)")
    seeds.add_argument("--system-run", action="append", default=[], metavar="RUN_DIR",
                       help="the run that wrote each --system file, in the same order")
    seeds.add_argument("--allow-mixed", action="store_true",
                       help="test runs that differ in more than the seed anyway (the verdict table says in what)")
    seeds.add_argument("--target-gain", type=float, metavar="GAIN",
                       help="the gain a claim states (e.g. a paper's): the verdict says whether the interval rules it "
                            "out, and the table how many seeds per side would detect it")
    seeds.add_argument("--out", required=True, help="folder for the tables (seeds, verdict: .md, .tsv)")
    seeds.add_argument("--metric", choices=["bleu", "ribes"], default="bleu",
                       help="BLEU, or RIBES for word order (with its paired bootstrap over sentence scores)")
    seeds.add_argument("--tokenized-bleu", action="store_true",
                       help="pre-tokenized data: multi-bleu.perl's BLEU, RIBES on the tokens as given; default "
                            "sacreBLEU and its 13a tokens")
    sim = kinds.add_parser("sim", help="Sim (paper 000, Eq. 12) of ExGRE/ReFSR runs against aligned target order")
    sim.add_argument("--run", action="append", required=True, metavar="NAME=RUN_DIR")
    sim.add_argument("--data", required=True, help="data directory prepared with reorder_positions: true")
    sim.add_argument("--split", default="test")
    sim.add_argument("--checkpoint", default="best")
    sim.add_argument("--device", default="auto")


def _add_alignment_verbs(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("align", help="word-align a parallel corpus (both directions, symmetrized; Pharaoh i-j)")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
    p.add_argument("--out", required=True, help="Pharaoh file, 0-based, one line per pair")
    p.add_argument("--aligner", default="eflomal", help="eflomal | fast_align")
    p.add_argument("--symmetrization", default="grow-diag-final-and",
                   help="grow-diag-final-and | intersection | union")
    p.add_argument("--model", help="a trained run: links from its attention by forced decoding")
    p.add_argument("--checkpoint", default="best")
    p.add_argument("--device", default="auto")
    e = sub.add_parser("evaluate-alignment", help="AER, precision and recall against gold sure/possible links")
    e.add_argument("--hyp", required=True, help="Pharaoh links, 0-based (as ordo align writes them)")
    e.add_argument("--gold", required=True, help="gold links: i-j sure, ipj possible; 1-based (.talp)")
    e.add_argument("--gold-zero-based", action="store_true")
    e.add_argument("--first", type=_positive_int, help="score only the first N sentences of both files")
    r = sub.add_parser("reorder", help="write sources in target word order from alignments (paper 000 oracle)")
    r.add_argument("--src", required=True)
    r.add_argument("--align", required=True, help="Pharaoh links of --src with its targets, 0-based")
    r.add_argument("--out", required=True)


def _add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="convert a trained baseline Transformer for another inference engine")
    p.add_argument("--model", required=True, help="run directory")
    p.add_argument("--format", required=True, choices=["ctranslate2"])
    p.add_argument("--out", required=True, help="output model directory")
    p.add_argument("--checkpoint", default="best", help="best | last | averaged | a path")
    p.add_argument("--quantization", choices=["int8", "int8_float32", "float16", "bfloat16"],
                   help="store the weights quantized (default: float32)")


def _port(text: str) -> int:
    """An argparse type: a TCP port, 1 to 65535."""
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{value} is above its maximum 65535")
    return value


def _add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="a translation server (JSON API) with a web page that shows word order")
    p.add_argument("--model", action="append", required=True, metavar="[NAME=]RUN",
                   help="a run directory to serve, named NAME (default: the directory's name); repeatable, the "
                        "first is the default model")
    p.add_argument("--checkpoint", default="best", help="best | last | averaged | a path (for every model)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback; another is your choice)")
    p.add_argument("--port", type=_port, default=8080)
    p.add_argument("--device", default="auto")
    p.add_argument("--int8", action="store_true", help="dynamic int8 quantization of the projections (CPU only)")
    p.add_argument("--max-batch-sentences", type=int, default=64, help="most sentences per request (413 beyond)")
    p.add_argument("--max-sentence-tokens", type=int, default=0,
                   help="most source tokens per sentence (413 beyond; default and cap: model.max_positions-1)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds before a request gets 504 (default 30)")
    p.add_argument("--batch-window-ms", type=float, default=5.0,
                   help="how long the worker waits for requests to batch together (default 5)")
    p.add_argument("--batch-tokens", type=int, default=6000,
                   help="most source tokens the worker gathers from several requests (default 6000)")
    p.add_argument("--max-queue-sentences", type=int, default=2048, help="most sentences waiting (503 beyond)")
    p.add_argument("--max-body-bytes", type=int, default=1_048_576,
                   help="most bytes in a request body (413 beyond, no more of it read; default 1048576, 1 MiB)")


def build_parser() -> argparse.ArgumentParser:
    """The ``ordo`` argument parser with all its verbs."""
    parser = argparse.ArgumentParser(prog="ordo", description="NMT toolkit with a focus on word order")
    sub = parser.add_subparsers(dest="verb", required=True)
    for add in (_add_prepare, _add_train, _add_translate, _add_average, _add_evaluate, _add_analyze, _add_alignment_verbs, _add_export, _add_demo, _add_serve):
        add(sub)
    return parser


def run_prepare(args: argparse.Namespace) -> None:
    """``ordo prepare``."""
    from ordo.config import from_dict, merge, parse_overrides, raw_source
    from ordo.data.prepare import PrepareConfig, prepare
    from ordo.data.textio import read_yaml

    raw = read_yaml(args.config) if args.config else {}
    flags = {
        "train_src": args.train_src, "train_tgt": args.train_tgt, "valid_src": args.valid_src,
        "valid_tgt": args.valid_tgt, "test_src": args.test_src, "test_tgt": args.test_tgt, "out": args.out,
        "src_lang": args.src_lang, "tgt_lang": args.tgt_lang, "vocab_size": args.vocab_size,
        "model_type": args.model_type, "max_len": args.max_len, "max_len_ratio": args.max_len_ratio,
        "joint_vocab": False if args.separate_vocab else None, "empty_lines": "skip" if args.skip_empty else None,
        "lattice": {"segmenters": [spec.strip() for spec in args.lattice.split(",")]} if args.lattice else None,
        "vocab_from": args.vocab_from,
    }
    raw = merge(merge(raw, {k: v for k, v in flags.items() if v is not None}), parse_overrides(args.set))
    where = raw_source(args.config, args.set) if args.config or args.set else "prepare"
    cfg = from_dict(PrepareConfig, raw, f"{where}:")
    for key in ("train_src", "train_tgt", "out"):
        if not getattr(cfg, key):
            raise OrdoError(f"prepare: --{key.replace('_', '-')} is required")
    from ordo.api import setup_logging

    setup_logging()
    prepare(cfg)


def train_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The raw config ``ordo train``'s arguments make: its YAML file, ``--set`` overrides, ``--data`` and
    ``--preset``."""
    from ordo.config import load_raw

    flags: dict[str, Any] = {"data": args.data} if args.data else {}
    if args.preset:
        flags["model"] = {"preset": args.preset}
    return load_raw(args.config, args.set, flags)


def run_train(args: argparse.Namespace) -> None:
    """``ordo train``.

    Raises:
        ConfigError: when ``--out`` names a file rather than a run directory.
    """
    from ordo import api
    from ordo.config import raw_source

    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ConfigError(f"--out {args.out}: a file, not a run directory (which holds config.yaml, train.log and "
                          "checkpoints/)")
    cfg = api.run_config(Path(args.out), train_settings(args), raw_source(args.config, args.set))
    api.train(cfg, args.out)


def _decode_overrides(args: argparse.Namespace) -> dict[str, Any]:
    values = {
        "beam_size": 1 if args.greedy else args.beam, "nbest": args.nbest, "length_penalty": args.lenpen,
        "max_len_a": args.max_len_a, "max_len_b": args.max_len_b, "max_tokens": args.batch_tokens,
        "min_len": args.min_len, "amp": args.amp, "long_lines": args.long_lines, "cpu_gemm": args.cpu_gemm,
    }
    return {k: v for k, v in values.items() if v is not None}


def run_translate(args: argparse.Namespace) -> None:
    """``ordo translate``: one line out per line in (n-best: ``i ||| text ||| score`` lines), streamed in chunks
    of ``--buffer-lines`` lines, each written (and flushed) as soon as it is translated; ``--output`` is
    replaced only when the whole input is done."""
    from tqdm import tqdm

    from ordo import api
    from ordo.config import replace_checked
    from ordo.data.textio import iter_lines, iter_stream_lines

    if args.buffer_lines < 1:
        raise ConfigError(f"--buffer-lines: {args.buffer_lines} is below its minimum 1")
    run = api.load_run(args.model, args.checkpoint, args.device, int8=args.int8)
    overrides = _decode_overrides(args)
    nbest = replace_checked(run.cfg.decode, "decode", **overrides).nbest
    source = args.input or "<stdin>"
    lines = iter_lines(args.input) if args.input else iter_stream_lines(sys.stdin.buffer, source)
    interactive = not args.input and sys.stdin.isatty()
    with _translation_output(args.output) as out, tqdm(
        total=_count_lines(args.input), disable=interactive, unit="sent", leave=False
    ) as bar:
        for first_line, texts in _chunks(lines, 1 if interactive else args.buffer_lines):
            hyps = run.translate_hypotheses(texts, bar.update, source, first_line, **overrides)
            if nbest > 1:
                out.writelines(f"{first_line - 1 + i} ||| {run.detokenize(h)} ||| {h.score:.4f}\n"
                               for i, hs in enumerate(hyps) for h in hs)
            else:
                out.writelines(run.detokenize(hs[0]) + "\n" for hs in hyps)
            out.flush()


@contextmanager
def _translation_output(path: str | None) -> Iterator[IO[str]]:
    """``path`` written atomically, or standard output."""
    from ordo.data.textio import atomic_write

    if path is None:
        yield sys.stdout
        return
    with atomic_write(path) as handle:
        yield handle


def _count_lines(path: str | None) -> int | None:
    """Lines in a regular file (for a progress bar's total); None for a pipe or standard input."""
    from ordo.data.textio import iter_lines

    if path is None or not Path(path).is_file():
        return None
    return sum(1 for _ in iter_lines(path))


def _chunks(lines: Iterator[tuple[int, str]], size: int) -> Iterator[tuple[int, list[str]]]:
    """``(first line number, texts)`` of consecutive groups of ``size`` numbered lines."""
    while chunk := list(islice(lines, size)):
        yield chunk[0][0], [text for _, text in chunk]


def run_average(args: argparse.Namespace) -> None:
    """``ordo average``."""
    from ordo import api

    print(api.average(args.model, args.last, args.output))


def run_evaluate(args: argparse.Namespace) -> None:
    """``ordo evaluate``: scores of --hyp against one --ref or several, and with --compare (one --ref) the
    significance of the difference; each file read once (a --ref of the shell's ``<(zcat F)`` is a pipe)."""
    from ordo.evaluation.bleu import corpus_scores, read_systems
    from ordo.evaluation.significance import compare_systems

    ref_paths: list[str] = args.ref
    if len(ref_paths) > 1 and (args.compare or args.ribes):
        raise OrdoError(f"{len(ref_paths)} references given: --compare and --ribes score against one --ref")
    names = ["hyp", *(["compare"] if args.compare else [])]
    systems, streams = read_systems([getattr(args, name) for name in names], ref_paths)
    lines = dict(zip(names, systems))
    report: dict[str, Any] = {name: corpus_scores(hyps, streams, tokenized_bleu=args.tokenized_bleu,
                                                  lowercase=args.lowercase) for name, hyps in lines.items()}
    if args.compare:
        report["significance"] = compare_systems(lines["hyp"], lines["compare"], streams[0], args.bootstrap_samples,
                                                 args.randomization_trials, args.lowercase)
    if args.ribes:
        _add_ribes(report, args, lines, streams[0])
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return
    for name in ("hyp", "compare"):
        if name in report:
            scores = report[name]
            line = f"{name:8s} BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}"
            if "tok_bleu" in scores:
                line += f"  tokenized BLEU {scores['tok_bleu']:.2f}"
            if "ribes" in scores:
                line += f"  RIBES {scores['ribes']:.2f}"
            print(line)
    if "significance" in report:
        _print_significance(report["significance"], args)
    print(f"signature: {report['hyp']['bleu_signature']}")


def _print_significance(significance: dict[str, Any], args: argparse.Namespace) -> None:
    """The tests of ``ordo evaluate --compare``, one line each: sacreBLEU's paired tests per metric, the sign
    test, and with --ribes the bootstrap over RIBES. Every p-value is two-sided."""
    print(f"paired tests of compare against hyp (sacreBLEU; bootstrap {args.bootstrap_samples} samples, "
          f"approximate randomization {args.randomization_trials} trials; two-sided p):")
    for name, test in significance["paired_tests"].items():
        print(f"  {name:6s} hyp {test['mean_a']:.2f} ± {test['ci_a']:.2f}  compare {test['mean_b']:.2f} ± "
              f"{test['ci_b']:.2f}  bootstrap p = {test['bootstrap_p']:.4g}  "
              f"randomization p = {test['randomization_p']:.4g}")
    sign = significance["sign_test"]
    print(f"sign test over BLEU (Collins et al. 2005): compare better on {sign['better']}, worse on "
          f"{sign['worse']}, ties {sign['ties']}; p = {sign['p_value']:.4g}")
    if "ribes_p_value" in significance:
        print(f"paired bootstrap over RIBES: p = {significance['ribes_p_value']:.4g}")


def _add_ribes(report: dict[str, Any], args: argparse.Namespace, systems: dict[str, list[str]],
               references: list[str]) -> None:
    """RIBES x100 of --hyp (and --compare), whose lines ``systems`` holds by name, against ``references`` into
    ``report``, and with --compare its paired bootstrap p."""
    from ordo.evaluation.order import ribes_tokens, sentence_ribes
    from ordo.evaluation.significance import paired_bootstrap_mean

    refs = [r.lower() for r in references] if args.lowercase else references
    sentence_scores = {}
    for name, hyps in systems.items():
        hyps = [h.lower() for h in hyps] if args.lowercase else hyps
        pairs = zip(ribes_tokens(hyps, args.tokenized_bleu), ribes_tokens(refs, args.tokenized_bleu))
        sentence_scores[name] = [sentence_ribes(ref.split(), hyp.split()) for hyp, ref in pairs]
        report[name]["ribes"] = 100 * sum(sentence_scores[name]) / len(sentence_scores[name])
    if "significance" in report:
        report["significance"]["ribes_p_value"] = paired_bootstrap_mean(
            sentence_scores["hyp"], sentence_scores["compare"], args.bootstrap_samples)


def _named(items: list[str], flag: str) -> list[tuple[str, Path]]:
    """``NAME=PATH`` arguments as (name, path) pairs; a name given twice is an error (its tables, plots and
    outputs would hold one system under that name)."""
    pairs: list[tuple[str, Path]] = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise OrdoError(f"{flag} {item}: expected NAME=PATH")
        if name in dict(pairs):
            raise OrdoError(f"{flag} {item}: the name {name!r} is given twice")
        pairs.append((name, Path(path)))
    return pairs


def _out_folder(out: str) -> Path:
    """``--out`` as a folder, made now, so that one that cannot be (a file, a path under a file) is named before
    any system translates."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise InputError(f"--out {out}: is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"--out {out}: cannot make the folder ({err.strerror or err})") from None
    return path


def _refuse_shared_seed_files(baselines: list[str], systems: list[str]) -> None:
    """Refuse a file given both as a ``--baseline`` and as a ``--system`` seed: one run cannot be a seed of both
    systems, and the test would count it on each side."""
    for system in systems:
        for baseline in baselines:
            if Path(system).resolve() == Path(baseline).resolve():
                raise InputError(f"--system {system}: the same file as --baseline {baseline}; give each system's "
                                 "own outputs")


def _seed_run_environments(args: argparse.Namespace) -> str:
    """``analyze seeds``' check of the runs behind its files (:func:`ordo.provenance.check_seed_runs`), or
    ``not checked`` without ``--baseline-run`` and ``--system-run``.

    Raises:
        InputError: when the runs given do not pair with the files one to one, or differ (without --allow-mixed).
    """
    from ordo.provenance import check_seed_runs

    if not args.baseline_run and not args.system_run:
        return "not checked (no --baseline-run, --system-run)"
    for flag, runs, files in (("--baseline-run", args.baseline_run, args.baseline),
                              ("--system-run", args.system_run, args.system)):
        if len(runs) != len(files):
            raise InputError(f"{flag}: {len(runs)} runs for {len(files)} output files; give the run of each file, "
                             "in the same order")
    return check_seed_runs([Path(run) for run in args.baseline_run], [Path(run) for run in args.system_run],
                           args.allow_mixed)


def _checked_runs(items: list[str], checkpoint: str) -> list[tuple[str, Path]]:
    """``--run NAME=RUN_DIR`` arguments as (name, run directory) pairs, each a run directory with the
    ``checkpoint`` asked for, so that a later run without it is named before the first one translates.

    Raises:
        CheckpointError: naming the ``--run`` that has no config.yaml or no such checkpoint.
    """
    from ordo.api import resolve_checkpoint
    from ordo.errors import CheckpointError

    runs = _named(items, "--run")
    for name, run_dir in runs:
        where = f"--run {name}={run_dir}"
        if not (run_dir / "config.yaml").is_file():
            raise CheckpointError(f"{where}: not an ordo run directory (no config.yaml)")
        try:
            path = resolve_checkpoint(run_dir, checkpoint)
        except CheckpointError as err:
            raise CheckpointError(f"{where}: {err}") from None
        if not path.is_file():
            raise CheckpointError(f"{where}: {path}: no such checkpoint")
    return runs


def run_analyze(args: argparse.Namespace) -> None:
    """``ordo analyze systems|robustness|length|order|attention|seeds|sim``: tables (.md, .tsv) and plots under
    --out."""
    from ordo.analysis import report
    from ordo.analysis.plots import pyplot
    from ordo.api import setup_logging
    from ordo.evaluation.bleu import read_systems

    setup_logging()
    if args.analysis in ("robustness", "length", "order", "attention"):
        pyplot()  # without matplotlib these fail here, before any system translates
    if args.analysis == "sim":
        runs = _checked_runs(args.run, args.checkpoint)
        print(report.sim_report(runs, Path(args.data), args.split, args.checkpoint, args.device))
        return
    if args.analysis == "seeds":
        _refuse_shared_seed_files(args.baseline, args.system)
        seed_outputs, (refs,) = read_systems([*args.baseline, *args.system], [args.ref])  # checks each, reads once
        base_runs = list(zip(args.baseline, seed_outputs[:len(args.baseline)]))
        system_runs = list(zip(args.system, seed_outputs[len(args.baseline):]))
        from ordo.evaluation.seeds import bleu_metric, ribes_metric

        metric = (ribes_metric if args.metric == "ribes" else bleu_metric)(args.tokenized_bleu)
        print(report.seeds_report(base_runs, system_runs, refs, _out_folder(args.out), metric, args.target_gain,
                                  _seed_run_environments(args)))
        return
    hyp_paths = _named(args.hyp, "--hyp") if args.analysis in ("order", "length") else []
    (sources, *hyp_lines), (refs,) = read_systems([args.src, *(path for _, path in hyp_paths)], [args.ref])
    systems = [(name, lines) for (name, _), lines in zip(hyp_paths, hyp_lines)]
    out = _out_folder(args.out)
    if args.analysis == "order":
        from ordo.evaluation.order import alignment_tau

        outputs = dict(systems)
        alignments = [("reference", _read_test_links(Path(args.align), sources, refs, args.ref))]
        for name, path in _named(args.hyp_align, "--hyp-align"):
            if name not in outputs:
                raise InputError(f"--hyp-align {name}={path}: no --hyp is named {name!r}")
            alignments.append((name, _read_test_links(path, sources, outputs[name], args.ref)))
        taus = [alignment_tau(links) for links in alignments[0][1]]
        print(report.order_report(systems, refs, taus, out, args.tokenized_bleu, args.edges))
        if args.hyp_align:
            print(report.order_tau_report(alignments, out))
        return
    if args.analysis == "length":
        print(report.length_report(systems, sources, refs, out, args.tokenized_bleu, args.groups, args.bounds,
                                   args.unit))
        return
    runs = _checked_runs(args.run, args.checkpoint)
    if args.analysis == "attention":
        for path in report.attention_plots(runs, sources, refs, args.line, out, args.checkpoint, args.device,
                                           (args.src, args.ref)):
            print(path)
        return
    decode = {"beam_size": args.beam} if args.beam else {}
    if args.analysis == "systems":
        print(report.systems_report(runs, sources, refs, out, args.checkpoint, args.tokenized_bleu, args.device,
                                    **decode))
    else:
        fractions = [p / 100 for p in range(0, 101, args.step)]
        print(report.robustness_report(runs, sources, refs, out, fractions, args.seed, args.checkpoint,
                                       args.tokenized_bleu, args.device, **decode))


def _read_test_links(path: Path, sources: list[str], targets: list[str], ref: str) -> list[list[tuple[int, int]]]:
    """The sure links of every line of a Pharaoh file that must have one line per test pair of ``ref``, each
    link within the words of its ``sources`` line and its ``targets`` line (the reference or a system's output).

    Raises:
        InputError: naming ``path`` for another line count, and its line for a link past the end of a pair.
    """
    from ordo.data.alignment.links import check_range, read_links, split_words

    links = [sorted(sentence.sure) for sentence in read_links(path)]
    if len(links) != len(sources):
        raise InputError(f"{path}: {len(links)} lines of links for {len(sources)} test pairs in {ref}")
    for number, (pair, source, target) in enumerate(zip(links, sources, targets), 1):
        check_range(pair, len(split_words(source)), len(split_words(target)), f"{path}:{number}")
    return links


def run_align(args: argparse.Namespace) -> None:
    """``ordo align``: with an aligner, or from a trained model's attention (``--model``)."""
    from ordo.api import setup_logging
    from ordo.data.alignment.aligners import write_alignment

    setup_logging()
    if args.model:
        from ordo import api
        from ordo.analysis.attention_align import align_with_model, refuse_lattice_run
        from ordo.data.alignment.links import format_links
        from ordo.data.textio import atomic_write
        from ordo.evaluation.bleu import read_hyp_ref

        sources, targets = read_hyp_ref(args.src, args.tgt)
        run = api.load_run(args.model, args.checkpoint, args.device)
        refuse_lattice_run(run, args.model)
        links = align_with_model(run, sources, targets, (args.src, args.tgt))
        with atomic_write(args.out) as handle:
            handle.writelines(format_links(pair) + "\n" for pair in links)
        print(f"{len(sources)} alignments from {args.model}'s attention -> {args.out}")
        return
    print(f"{write_alignment(args.src, args.tgt, args.out, args.aligner, args.symmetrization)} alignments -> {args.out}")


def run_evaluate_alignment(args: argparse.Namespace) -> None:
    """``ordo evaluate-alignment``: AER (Och & Ney 2003) of --hyp against --gold."""
    from ordo.evaluation.aer import score_alignment_files

    result = score_alignment_files(args.hyp, args.gold, not args.gold_zero_based, args.first)
    print(f"AER {100 * result.aer:.2f}  precision {100 * result.precision:.2f}  recall {100 * result.recall:.2f}"
          f"  ({result.sentences} sentences)")


def run_reorder(args: argparse.Namespace) -> None:
    """``ordo reorder``: each source line with its words moved to their target-order slots."""
    from ordo.data.alignment.links import check_range, paired_lines, read_links, split_words
    from ordo.data.alignment.target_order import reorder_words, target_order
    from ordo.data.textio import atomic_write, iter_lines

    with atomic_write(args.out) as handle:
        pairs = paired_lines(iter_lines(args.src), read_links(args.align), (args.src, args.align))
        for (number, text), links in pairs:
            words = split_words(text)
            check_range(links.sure, len(words), None, f"{args.align}:{number}")
            handle.write(" ".join(reorder_words(words, target_order(len(words), links.sure))) + "\n")


def run_export(args: argparse.Namespace) -> None:
    """``ordo export --format ctranslate2``."""
    from ordo.export import export_ctranslate2

    print(export_ctranslate2(args.model, args.out, args.checkpoint, args.quantization))


def _served_runs(specs: list[str]) -> list[tuple[str, Path]]:
    """``[NAME=]RUN`` flags as (name, run directory) pairs; a name given twice is an error. A flag that names an
    existing directory is a RUN, whatever ``=`` its path holds (``runs/lr=1e-3``)."""
    named = []
    for spec in specs:
        name, sep, run = ("", "", spec) if Path(spec).is_dir() else spec.partition("=")
        if sep and not (name and run):
            raise ConfigError(f"--model {spec}: expected RUN or NAME=RUN")
        named.append((name, Path(run)) if sep else (Path(spec).name or spec, Path(spec)))
    names = [name for name, _ in named]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"--model: the name {twice[0]!r} is given twice (use NAME=RUN)")
    return named


def _listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` for uvicorn, bound before the models load so that an address in use
    is an error at once.

    Raises:
        ConfigError: naming the address when it cannot be bound (in use, not this machine's, not permitted).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        listener = socket.socket(family, kind, proto)
    except OSError as err:
        raise ConfigError(f"{host}:{port}: cannot listen ({err.strerror or err})") from None
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
    except OSError as err:
        listener.close()
        raise ConfigError(f"{host}:{port}: cannot listen ({err.strerror or err})") from None
    return listener


def run_serve(args: argparse.Namespace) -> None:
    """``ordo serve``: load every ``--model`` once, then serve them with uvicorn until interrupted."""
    import logging

    from ordo.errors import import_extra

    import_extra("fastapi", "serve")
    uvicorn = import_extra("uvicorn", "serve")
    from ordo import api
    from ordo.serve.app import ServeLimits, create_app

    for flag, value in (("--max-batch-sentences", args.max_batch_sentences), ("--batch-tokens", args.batch_tokens),
                        ("--max-queue-sentences", args.max_queue_sentences), ("--timeout", args.timeout),
                        ("--max-body-bytes", args.max_body_bytes)):
        if value <= 0:
            raise ConfigError(f"{flag}: {value} must be positive")
    for flag, value in (("--max-sentence-tokens", args.max_sentence_tokens),
                        ("--batch-window-ms", args.batch_window_ms)):
        if value < 0:
            raise ConfigError(f"{flag}: {value:g} must be 0 or more")
    served = _served_runs(args.model)
    with _listening_socket(args.host, args.port) as listener:
        api.setup_logging()
        runs = {name: api.load_run(run, args.checkpoint, args.device, int8=args.int8) for name, run in served}
        limits = ServeLimits(args.max_batch_sentences, args.max_sentence_tokens, args.timeout,
                             args.batch_window_ms / 1000, args.batch_tokens, args.max_queue_sentences,
                             args.max_body_bytes)
        log = logging.getLogger("ordo.serve")
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            log.warning("binding %s: the server is reachable from other machines, without authentication", args.host)
        log.info("serving %s on http://%s:%d/ (API: /docs)", ", ".join(runs), args.host, args.port)
        uvicorn.Server(uvicorn.Config(create_app(runs, limits), log_level="warning")).run(sockets=[listener])


def run_demo(args: argparse.Namespace) -> None:
    """``ordo demo``."""
    from ordo.demo import run_demo as demo

    demo(Path(args.out), minutes=args.minutes, seed=args.seed, train_size=args.train_size)


VERBS = {
    "prepare": run_prepare, "train": run_train, "translate": run_translate, "average": run_average,
    "evaluate": run_evaluate, "analyze": run_analyze, "align": run_align,
    "evaluate-alignment": run_evaluate_alignment, "reorder": run_reorder, "export": run_export,
    "demo": run_demo,
    "serve": run_serve,
}


def set_verb_environment(argv: list[str]) -> None:
    """Environment defaults a verb needs before PyTorch loads OpenMP (so before the parser is built): OpenMP's
    wait policy (:func:`ordo.wait_policy.set_wait_policy`: passive for ``serve``, and for a computing verb on
    cores that other work keeps busy, said on stderr). A value the user set wins."""
    note = set_wait_policy(argv[0], os.environ) if argv else None
    if note:
        print(note, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ordo`` console script; user errors print one line and exit with status 2, training
    stopped by SIGINT or SIGTERM (after saving a checkpoint) with 128 + the signal's number. A ``torchrun``
    training worker ends through :func:`ordo.training.distributed.exit_worker`."""
    set_verb_environment(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    code = run_verb(args)
    if args.verb == "train":
        from ordo.training.distributed import exit_worker, is_torchrun_worker

        if is_torchrun_worker():
            exit_worker(code)
    return code


def run_verb(args: argparse.Namespace) -> int:
    """Run the verb ``args`` names; its exit status (see :func:`main`)."""
    try:
        VERBS[args.verb](args)
    except OrdoError as err:
        print(f"ordo {args.verb}: error: {err}", file=sys.stderr)
        return 2
    except TrainingInterrupted as err:
        print(f"ordo {args.verb}: {err}", file=sys.stderr)
        return 128 + err.signal_number
    except KeyboardInterrupt:
        print(f"ordo {args.verb}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
