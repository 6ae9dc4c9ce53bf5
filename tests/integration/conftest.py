"""Shared fixtures: a small prepared synthetic corpus (SVO -> SOV) for training tests."""

from pathlib import Path

import pytest

from ordo.prepare import PrepareConfig, prepare
from ordo.synthetic import write_corpus


def prepared(root: Path, train: int, vocab_size: int) -> Path:
    """Write and prepare a synthetic corpus under ``root``; returns the data directory."""
    splits = write_corpus(root / "text", {"train": train, "valid": 60, "test": 60}, seed=3)
    cfg = PrepareConfig(
        train_src=str(splits["train"][0]), train_tgt=str(splits["train"][1]),
        valid_src=str(splits["valid"][0]), valid_tgt=str(splits["valid"][1]),
        test_src=str(splits["test"][0]), test_tgt=str(splits["test"][1]),
        out=str(root / "data"), vocab_size=vocab_size,
    )
    prepare(cfg, progress=False)
    return root / "data"


@pytest.fixture(scope="session")
def small_data(tmp_path_factory) -> Path:
    """1,500 training pairs, joint vocabulary of 200 pieces."""
    return prepared(tmp_path_factory.mktemp("small"), 1500, 200)


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory) -> Path:
    """6,000 training pairs, for the end-to-end BLEU floor."""
    return prepared(tmp_path_factory.mktemp("demo"), 6000, 300)
