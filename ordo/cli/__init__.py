"""The ``ordo`` command line: one verb per workflow step, each a thin layer over :mod:`ordo.api`.

This package is the only part of ordo that touches argparse: :mod:`ordo.cli.parser` builds the parser, the
verbs run from :mod:`~ordo.cli.training`, :mod:`~ordo.cli.translation`, :mod:`~ordo.cli.evaluation`,
:mod:`~ordo.cli.alignment` and :mod:`~ordo.cli.serving`, and this module dispatches them (:func:`main`). Each
verb imports what it needs (torch included) only when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys

from ordo.cli.alignment import run_align, run_evaluate_alignment, run_reorder
from ordo.cli.evaluation import run_analyze, run_evaluate
from ordo.cli.parser import build_parser
from ordo.cli.serving import run_serve
from ordo.cli.training import run_average, run_demo, run_prepare, run_train, train_settings
from ordo.cli.translation import run_export, run_score, run_translate
from ordo.errors import OrdoError, TrainingInterrupted
from ordo.wait_policy import set_wait_policy

__all__ = ["VERBS", "build_parser", "main", "run_verb", "set_verb_environment", "train_settings"]

VERBS = {
    "prepare": run_prepare, "train": run_train, "translate": run_translate, "score": run_score,
    "average": run_average,
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
