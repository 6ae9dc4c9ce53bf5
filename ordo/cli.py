"""The ``ordo`` command line: one verb per workflow step, each a thin layer over :mod:`ordo.api`.

The only module that touches argparse.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ordo.errors import OrdoError


def _add_prepare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prepare", help="validate a parallel corpus, train SentencePiece, binarize")
    p.add_argument("config", nargs="?", help="YAML file with PrepareConfig keys (flags override it)")
    for flag in ("train-src", "train-tgt", "valid-src", "valid-tgt", "test-src", "test-tgt", "out", "src-lang", "tgt-lang"):
        p.add_argument(f"--{flag}")
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--separate-vocab", action="store_true", help="one SentencePiece model per side")
    p.add_argument("--model-type", choices=["unigram", "bpe"])
    p.add_argument("--max-len", type=int, help="drop training pairs longer than this (pieces)")
    p.add_argument("--max-len-ratio", type=float, help="drop training pairs whose length ratio exceeds this")
    p.add_argument("--skip-empty", action="store_true", help="skip (and count) empty lines instead of failing")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any PrepareConfig key")


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a model (resumes when RUN_DIR holds checkpoints)")
    p.add_argument("config", nargs="?", help="YAML experiment config")
    p.add_argument("--data", help="directory written by `ordo prepare`")
    p.add_argument("--preset", choices=["tiny", "small", "base", "big"])
    p.add_argument("--out", required=True, help="run directory (checkpoints, log, config)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="e.g. train.lr=5e-4")


def _add_translate(sub: argparse._SubParsersAction) -> None:
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
    p.add_argument("--batch-tokens", type=int, help="source tokens per batch")
    p.add_argument("--device", default="auto")


def _add_average(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("average", help="average the last N checkpoints of a run")
    p.add_argument("--model", required=True, help="run directory")
    p.add_argument("--last", type=int, default=5)
    p.add_argument("--output", help="default: RUN_DIR/checkpoints/averaged.pt")


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="BLEU/chrF, and significance against a second system")
    p.add_argument("--hyp", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--compare", help="a second system's output: sign test and paired bootstrap")
    p.add_argument("--tokenized-bleu", action="store_true", help="also BLEU as multi-bleu.perl computes it")
    p.add_argument("--lowercase", action="store_true")
    p.add_argument("--bootstrap-samples", type=int, default=1000)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="synthetic SVO->SOV pair: prepare, train a tiny model, translate, score")
    p.add_argument("--out", default="demo_run")
    p.add_argument("--minutes", type=float, default=0.0, help="optional cap on training minutes (0: none)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train-size", type=int, default=20000)


def build_parser() -> argparse.ArgumentParser:
    """The ``ordo`` argument parser with all its verbs."""
    parser = argparse.ArgumentParser(prog="ordo", description="NMT toolkit with a focus on word order")
    sub = parser.add_subparsers(dest="verb", required=True)
    for add in (_add_prepare, _add_train, _add_translate, _add_average, _add_evaluate, _add_demo):
        add(sub)
    return parser


def run_prepare(args: argparse.Namespace) -> None:
    """``ordo prepare``."""
    from ordo.config import from_dict, merge, parse_overrides, read_yaml
    from ordo.prepare import PrepareConfig, prepare

    raw = read_yaml(args.config) if args.config else {}
    flags = {
        "train_src": args.train_src, "train_tgt": args.train_tgt, "valid_src": args.valid_src,
        "valid_tgt": args.valid_tgt, "test_src": args.test_src, "test_tgt": args.test_tgt, "out": args.out,
        "src_lang": args.src_lang, "tgt_lang": args.tgt_lang, "vocab_size": args.vocab_size,
        "model_type": args.model_type, "max_len": args.max_len, "max_len_ratio": args.max_len_ratio,
        "joint_vocab": False if args.separate_vocab else None, "empty_lines": "skip" if args.skip_empty else None,
    }
    raw = merge(merge(raw, {k: v for k, v in flags.items() if v is not None}), parse_overrides(args.set))
    cfg = from_dict(PrepareConfig, raw, args.config or "prepare")
    for key in ("train_src", "train_tgt", "out"):
        if not getattr(cfg, key):
            raise OrdoError(f"prepare: --{key.replace('_', '-')} is required")
    from ordo.api import setup_logging

    setup_logging()
    prepare(cfg)


def run_train(args: argparse.Namespace) -> None:
    """``ordo train``."""
    from ordo import api
    from ordo.config import merge, parse_overrides, read_yaml

    raw: dict[str, Any] = read_yaml(args.config) if args.config else {}
    if args.data:
        raw["data"] = args.data
    if args.preset:
        raw.setdefault("model", {})["preset"] = args.preset
    raw = merge(raw, parse_overrides(args.set))
    cfg = api.run_config(Path(args.out), raw)
    api.train(cfg, args.out)


def _decode_overrides(args: argparse.Namespace) -> dict[str, Any]:
    values = {
        "beam_size": 1 if args.greedy else args.beam, "nbest": args.nbest, "length_penalty": args.lenpen,
        "max_len_a": args.max_len_a, "max_len_b": args.max_len_b, "max_tokens": args.batch_tokens,
    }
    return {k: v for k, v in values.items() if v is not None}


def run_translate(args: argparse.Namespace) -> None:
    """``ordo translate``: one line out per line in (n-best: ``i ||| text ||| score`` lines)."""
    from ordo import api
    from ordo.textio import atomic_write, iter_stream_lines, read_lines

    run = api.load_run(args.model, args.checkpoint, args.device)
    if args.input:
        lines = read_lines(args.input)
    else:
        lines = [text for _, text in iter_stream_lines(sys.stdin.buffer, "<stdin>")]
    overrides = _decode_overrides(args)
    hyps = run.translate_hypotheses(lines, progress=True, source=args.input or "<stdin>", **overrides)
    nbest = overrides.get("nbest", run.cfg.decode.nbest)
    if nbest > 1:
        out = [f"{i} ||| {run.detokenize(h)} ||| {h.score:.4f}" for i, hs in enumerate(hyps) for h in hs]
    else:
        out = [run.detokenize(hs[0]) if hs else "" for hs in hyps]
    if args.output:
        with atomic_write(args.output) as handle:
            handle.writelines(line + "\n" for line in out)
    else:
        sys.stdout.writelines(line + "\n" for line in out)


def run_average(args: argparse.Namespace) -> None:
    """``ordo average``."""
    from ordo import api

    print(api.average(args.model, args.last, args.output))


def run_evaluate(args: argparse.Namespace) -> None:
    """``ordo evaluate``: scores of --hyp, and with --compare the significance of the difference."""
    from ordo.evaluation.bleu import score_files
    from ordo.evaluation.significance import compare_files

    report: dict[str, Any] = {"hyp": score_files(args.hyp, args.ref, args.tokenized_bleu, args.lowercase)}
    if args.compare:
        report["compare"] = score_files(args.compare, args.ref, args.tokenized_bleu, args.lowercase)
        report["significance"] = compare_files(
            args.hyp, args.compare, args.ref, args.bootstrap_samples, lowercase=args.lowercase
        )
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return
    for name in ("hyp", "compare"):
        if name in report:
            scores = report[name]
            line = f"{name:8s} BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}"
            if "tok_bleu" in scores:
                line += f"  tokenized BLEU {scores['tok_bleu']:.2f}"
            print(line)
    if "significance" in report:
        sign, boot = report["significance"]["sign_test"], report["significance"]["paired_bootstrap"]
        print(f"sign test (Collins et al. 2005): compare better on {sign['better']}, worse on {sign['worse']}, "
              f"ties {sign['ties']}; two-sided p = {sign['p_value']:.4g}")
        print(f"paired bootstrap (Koehn 2004, {boot['num_samples']} samples): hyp {boot['mean_a']:.2f} "
              f"[{boot['ci_a'][0]:.2f}, {boot['ci_a'][1]:.2f}], compare {boot['mean_b']:.2f} "
              f"[{boot['ci_b'][0]:.2f}, {boot['ci_b'][1]:.2f}]; p(compare not better) = {boot['p_value']:.4g}")
    print(f"signature: {report['hyp']['bleu_signature']}")


def run_demo(args: argparse.Namespace) -> None:
    """``ordo demo``."""
    from ordo.demo import run_demo as demo

    demo(Path(args.out), minutes=args.minutes, seed=args.seed, train_size=args.train_size)


VERBS = {
    "prepare": run_prepare, "train": run_train, "translate": run_translate, "average": run_average,
    "evaluate": run_evaluate, "demo": run_demo,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ordo`` console script; user errors print one line and exit with status 2."""
    args = build_parser().parse_args(argv)
    try:
        VERBS[args.verb](args)
    except OrdoError as err:
        print(f"ordo {args.verb}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ordo {args.verb}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
