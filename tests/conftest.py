"""Shared fixtures: a small prepared synthetic corpus (SVO -> SOV) for training tests."""

from pathlib import Path

import pytest

from ordo.data.prepare import PrepareConfig, prepare
from ordo.data.synthetic import write_corpus


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


TINY_TRAIN = ["model.preset=tiny", "model.d_model=32", "model.ffn_dim=64", "train.max_tokens=400",
              "train.warmup_steps=20", "train.lr=3e-3", "train.progress=false", "train.valid_bleu=false",
              "train.threads=2"]


@pytest.fixture
def train_tiny(small_data, tmp_path):
    """Train a tiny model on ``small_data`` with extra ``--set`` overrides; returns the validation losses."""
    from ordo import api
    from ordo.config import load_config
    from ordo.training.checkpoint import load_checkpoint, step_checkpoints

    def run(*overrides: str, steps: int = 120, name: str = "run") -> list[float]:
        cfg = load_config(None, [f"data={small_data}", *TINY_TRAIN, f"train.max_steps={steps}",
                                 f"train.valid_every={steps // 3}", "train.keep_last=3", *overrides])
        api.train(cfg, tmp_path / name)
        return [load_checkpoint(p)["valid"]["loss"] for p in step_checkpoints(tmp_path / name / "checkpoints")]

    return run


def train_tiny_run(data: Path, run: Path, *overrides: str) -> Path:
    """A tiny baseline trained for 200 updates on ``data`` into ``run``."""
    from ordo import api
    from ordo.config import load_config

    cfg = load_config(None, [f"data={data}", "model.preset=tiny", "model.d_model=64", "train.max_tokens=800",
                             "train.warmup_steps=30", "train.lr=3e-3", "train.max_steps=200", "train.progress=false",
                             "train.valid_bleu=false", *overrides])
    api.train(cfg, run)
    return run


@pytest.fixture(scope="session")
def trained_run(small_data, tmp_path_factory) -> Path:
    """A tiny baseline trained for 200 updates on ``small_data`` on the CPU (use its "last" checkpoint); far
    from converged, so tests compare its translations with another path's rather than with the references."""
    run = tmp_path_factory.mktemp("trained") / "run"
    return train_tiny_run(small_data, run, "train.valid_every=200", "train.threads=2", "train.device=cpu")


@pytest.fixture(scope="session")
def cuda_run(small_data, tmp_path_factory) -> Path:
    """As ``trained_run``, on a CUDA GPU under the default ``train.amp`` (bf16 there), validated twice."""
    run = tmp_path_factory.mktemp("cuda") / "run"
    return train_tiny_run(small_data, run, "train.valid_every=100", "train.device=cuda")


@pytest.fixture(scope="session")
def aligned_data(tmp_path_factory) -> Path:
    """``small_data``'s corpus prepared with eflomal alignments and the ``reorder_positions`` field."""
    root = tmp_path_factory.mktemp("aligned")
    splits = write_corpus(root / "text", {"train": 1500, "valid": 60, "test": 60}, seed=3)
    cfg = PrepareConfig(
        train_src=str(splits["train"][0]), train_tgt=str(splits["train"][1]),
        valid_src=str(splits["valid"][0]), valid_tgt=str(splits["valid"][1]),
        test_src=str(splits["test"][0]), test_tgt=str(splits["test"][1]),
        out=str(root / "data"), vocab_size=200, reorder_positions=True,
    )
    prepare(cfg, progress=False)
    return root / "data"


@pytest.fixture
def onednn_calls(monkeypatch) -> list[tuple[int, ...]]:
    """The shapes of the inputs that reach oneDNN's kernel while the test runs."""
    calls: list[tuple[int, ...]] = []
    from ordo import gemm

    kernel = gemm._onednn_linear

    def spy(x, weight, bias):
        calls.append(tuple(x.shape))
        return kernel(x, weight, bias)

    monkeypatch.setattr(gemm, "_onednn_linear", spy)
    return calls
