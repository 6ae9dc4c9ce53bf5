"""The verbs that make a model: ``ordo prepare``, ``train`` (and the config its arguments make), ``average``
and ``demo``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ordo.errors import ConfigError, OrdoError


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


def run_average(args: argparse.Namespace) -> None:
    """``ordo average``."""
    from ordo import api

    print(api.average(args.model, args.last, args.output))


def run_demo(args: argparse.Namespace) -> None:
    """``ordo demo``."""
    from ordo.demo import run_demo as demo

    demo(Path(args.out), minutes=args.minutes, seed=args.seed, train_size=args.train_size)
