"""The ``ordo`` argument parser: each verb's flags, and the argparse types that check their values."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


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
    p.add_argument("--model", action="append", required=True, metavar="RUN",
                   help="run directory; repeat it to translate with the ensemble of the runs (mean of their "
                        "probabilities; decode settings from the first run's config)")
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
    p.add_argument("--long-lines", choices=choices(DecodeConfig, "long_lines"),
                   help="a line over the model's length: truncate (default; a warning names the line) or error")
    p.add_argument("--buffer-lines", type=int, default=2000,
                   help="translate the input in chunks of N lines, each written as soon as it is done (default "
                        "2000; 1 when reading a terminal)")
    _add_model_run_flags(p, "translate")


def _add_score(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="log-probability of given translations under a run (forced decoding)")
    p.add_argument("--model", action="append", required=True, metavar="RUN",
                   help="run directory; repeat it to score under the ensemble of the runs (the mean of their "
                        "probabilities per token, as `translate` searches it)")
    p.add_argument("--checkpoint", default="best", help="best | last | averaged | a path")
    p.add_argument("--src", required=True, help="source sentences, one per line")
    p.add_argument("--tgt", required=True, help="the translations to score, one per source line")
    p.add_argument("--output", help="one score per line (default: standard output)")
    p.add_argument("--normalize", action="store_true",
                   help="the mean log-probability per target token (pieces and EOS) instead of the sum")
    p.add_argument("--buffer-lines", type=int, default=2000,
                   help="score the pairs in chunks of N, each written as soon as it is done (default 2000)")
    _add_model_run_flags(p, "score")


def _add_model_run_flags(p: argparse.ArgumentParser, verb: str) -> None:
    """The flags of how a verb runs a trained model: batches, streaming, device and precision."""
    from ordo.choices import choices
    from ordo.config import DecodeConfig

    p.add_argument("--batch-tokens", type=int, help="tokens per batch (of the source; when scoring, of the longer side)")
    p.add_argument("--device", default="auto")
    p.add_argument("--int8", action="store_true",
                   help="dynamic int8 quantization of the projections (CPU only; faster, outputs may differ slightly)")
    p.add_argument("--amp", choices=choices(DecodeConfig, "amp"),
                   help=f"{verb} under autocast (bf16 on a GPU: faster, outputs may differ slightly); default: the "
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
                                       "robustness, BLEU by length and by word-order difficulty, attention, Sim; "
                                       "contrastive word-order probes")
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
    contrastive = kinds.add_parser("contrastive", parents=[common],
                                   help="how often each run scores the references above the same words swapped, "
                                        "moved, reversed or (with --align) in the source's order (forced "
                                        "decoding: a word-order probe)")
    contrastive.add_argument("--run", action="append", required=True, metavar="NAME=RUN_DIR",
                             help="a system (repeat; the first is the one the others are tested against); runs "
                                  "under one NAME are its seeds, compared over seeds in contrastive_seeds")
    contrastive.add_argument("--checkpoint", default="best")
    contrastive.add_argument("--device", default="auto")
    contrastive.add_argument("--seed", type=int, default=1, help="seed of the variants")
    contrastive.add_argument("--align", help="Pharaoh links of --src/--ref (as for `analyze order`): adds the "
                                             "source-order variant, each reordered reference in its source's word "
                                             "order")
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
    for add in (_add_prepare, _add_train, _add_translate, _add_score, _add_average, _add_evaluate, _add_analyze, _add_alignment_verbs, _add_export, _add_demo, _add_serve):
        add(sub)
    return parser
