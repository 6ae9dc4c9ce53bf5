"""The verbs that use a trained model as it is: ``ordo translate`` and ``score`` (streamed in chunks of lines),
and ``export``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import IO, Any, TypeVar

from ordo.errors import ConfigError

T = TypeVar("T")


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
    replaced only when the whole input is done. Several ``--model`` runs translate as one ensemble
    (:func:`ordo.api.load_ensemble`), with the first run's decode settings unless flags override them."""
    from tqdm import tqdm

    from ordo import api
    from ordo.config import replace_checked
    from ordo.data.textio import iter_lines, iter_stream_lines

    if args.buffer_lines < 1:
        raise ConfigError(f"--buffer-lines: {args.buffer_lines} is below its minimum 1")
    run = api.load_ensemble(args.model, args.checkpoint, args.device, int8=args.int8)
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


def _chunks(lines: Iterator[tuple[int, T]], size: int) -> Iterator[tuple[int, list[T]]]:
    """``(first line number, items)`` of consecutive groups of ``size`` numbered lines."""
    while chunk := list(islice(lines, size)):
        yield chunk[0][0], [item for _, item in chunk]


def run_score(args: argparse.Namespace) -> None:
    """``ordo score``: log P(target | source) of each ``--src`` / ``--tgt`` pair under one run, or the ensemble
    of several ``--model`` runs (:meth:`ordo.api.LoadedRun.score`), one line per pair (the sum over the target's pieces and EOS, natural log;
    the mean per token with ``--normalize``), streamed in chunks of ``--buffer-lines`` pairs; ``--output`` is
    replaced only when every pair is scored. The corpus's log-probability per token and perplexity go to
    stderr."""
    import math

    from tqdm import tqdm

    from ordo import api
    from ordo.data.textio import iter_parallel_lines

    if args.buffer_lines < 1:
        raise ConfigError(f"--buffer-lines: {args.buffer_lines} is below its minimum 1")
    run = api.load_ensemble(args.model, args.checkpoint, args.device, int8=args.int8)
    settings = {"amp": args.amp, "cpu_gemm": args.cpu_gemm, "max_tokens": args.batch_tokens}
    overrides = {key: value for key, value in settings.items() if value is not None}
    pairs = ((number, (source, target)) for number, source, target in iter_parallel_lines(args.src, args.tgt))
    log_prob, tokens, count = 0.0, 0, 0
    with _translation_output(args.output) as out, tqdm(total=_count_lines(args.src), unit="pair", leave=False) as bar:
        for first_line, chunk in _chunks(pairs, args.buffer_lines):
            scores = run.score([source for source, _ in chunk], [target for _, target in chunk], bar.update,
                               (args.src, args.tgt), first_line, **overrides)
            out.writelines(f"{score.per_token if args.normalize else score.log_prob:.4f}\n" for score in scores)
            out.flush()
            log_prob += sum(score.log_prob for score in scores)
            tokens += sum(score.tokens for score in scores)
            count += len(scores)
    per_token = log_prob / tokens if tokens else 0.0
    print(f"{count} pairs, {tokens} target tokens (pieces and EOS): log-probability {per_token:.4f} per token, "
          f"perplexity {math.exp(-per_token):.2f}", file=sys.stderr)


def run_export(args: argparse.Namespace) -> None:
    """``ordo export --format ctranslate2``."""
    from ordo.export import export_ctranslate2

    print(export_ctranslate2(args.model, args.out, args.checkpoint, args.quantization))
