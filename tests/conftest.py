"""Shared fixtures: a small prepared synthetic corpus (SVO -> SOV) for training tests.

OpenMP's threads in the test processes, and in the processes they start (the CLI, torchrun), wait passively
(``OMP_WAIT_POLICY=PASSIVE``, unless the environment says otherwise): idle threads sleep instead of spinning, so
the tests and other work on the same cores slow each other down by their work alone. OpenMP reads it once, when
torch loads it: set here, before any import of torch.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import contextlib
import threading
from collections.abc import Callable, Iterator
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


SHARD_PAIRS = (240, 160, 200)  # training pairs of each shard of ``sharded_data``: unequal, to tell them apart


@pytest.fixture(scope="session")
def sharded_data(tmp_path_factory) -> list[Path]:
    """One synthetic corpus prepared as three shards of SHARD_PAIRS training pairs (disjoint sentences): the
    first with valid/test and a joint vocabulary of 200 pieces, the others with ``vocab_from`` the first."""
    root = tmp_path_factory.mktemp("shards")
    sizes = {f"train{index}": pairs for index, pairs in enumerate(SHARD_PAIRS)}
    splits = write_corpus(root / "text", {**sizes, "valid": 60, "test": 60}, seed=3)
    dirs = [root / f"shard{index}" for index in range(len(SHARD_PAIRS))]
    for index, data_dir in enumerate(dirs):
        train_src, train_tgt = splits[f"train{index}"]
        held_out = {"valid_src": str(splits["valid"][0]), "valid_tgt": str(splits["valid"][1]),
                    "test_src": str(splits["test"][0]), "test_tgt": str(splits["test"][1])} if index == 0 else {}
        cfg = PrepareConfig(train_src=str(train_src), train_tgt=str(train_tgt), out=str(data_dir), vocab_size=200,
                            vocab_from=str(dirs[0]) if index else "", **held_out)
        prepare(cfg, progress=False)
    return dirs


TINY_TRAIN = ["model.preset=tiny", "model.d_model=32", "model.ffn_dim=64", "train.max_tokens=400",
              "train.warmup_steps=20", "train.lr=3e-3", "train.progress=false", "train.valid_bleu=false",
              "train.threads=2"]


def train_tiny_steps(data: Path | str, run: Path, steps: int, *overrides: str) -> list[float]:
    """Train a tiny model (TINY_TRAIN) on ``data`` (a directory, or shards ``DIR1:DIR2``) into ``run`` for ``steps``
    updates, validated three times, with extra ``--set`` overrides; returns the validation losses."""
    from ordo import api
    from ordo.checkpoint import load_checkpoint, step_checkpoints
    from ordo.config import load_config

    cfg = load_config(None, [f"data={data}", *TINY_TRAIN, f"train.max_steps={steps}",
                             f"train.valid_every={steps // 3}", "train.keep_last=3", *overrides])
    api.train(cfg, run)
    return [load_checkpoint(p)["valid"]["loss"] for p in step_checkpoints(run / "checkpoints")]


@pytest.fixture
def tiny_config():
    """The config of a tiny run (TINY_TRAIN) on ``data`` (a directory, or shards ``DIR1:DIR2``), with extra
    ``--set`` overrides."""
    from ordo.config import load_config

    def build(data: Path | str, *overrides: str):
        return load_config(None, [f"data={data}", *TINY_TRAIN, *overrides])

    return build


@pytest.fixture
def train_tiny_on(tmp_path):
    """``train_tiny_steps`` into ``tmp_path / name``: (data, steps, *overrides) -> the validation losses."""

    def run(data: Path | str, steps: int, *overrides: str, name: str = "run") -> list[float]:
        return train_tiny_steps(data, tmp_path / name, steps, *overrides)

    return run


@pytest.fixture
def train_tiny(small_data, tmp_path):
    """Train a tiny model on ``small_data`` with extra ``--set`` overrides; returns the validation losses."""

    def run(*overrides: str, steps: int = 120, name: str = "run") -> list[float]:
        return train_tiny_steps(small_data, tmp_path / name, steps, *overrides)

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


RNN_TINY = ["model.preset=rnn-tiny", "model.d_model=32", "model.embed_dim=32"]


@pytest.fixture(scope="session")
def rnn_run(small_data, tmp_path_factory) -> Path:
    """A tiny RNNsearch* (RNN_TINY) trained as ``train_tiny`` trains for 30 updates on ``small_data``, validated
    every 10: shared by the tests that align with a trained RNN or start from one."""
    run = tmp_path_factory.mktemp("rnn") / "run"
    train_tiny_steps(small_data, run, 30, *RNN_TINY)
    return run


@pytest.fixture(scope="session")
def loaded_run(trained_run):
    """``trained_run`` loaded for translation (its "last" checkpoint)."""
    from ordo import api

    return api.load_run(trained_run, "last")


@pytest.fixture(scope="session")
def small_test_sources(small_data) -> list[str]:
    """The source side of ``small_data``'s test text, a sentence per item."""
    return (small_data.parent / "text" / "test.src").read_text(encoding="utf-8").splitlines()


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


@contextlib.contextmanager
def fed_pipe(path: Path, text: str) -> Iterator[Path]:
    """A named pipe at ``path`` that gives ``text`` to its first reader and an empty file to any later one, as the
    shell's ``<(zcat F)`` is read once: a reader never waits for a writer, so code that reads it twice fails rather
    than hangs; the writer stops when the block ends."""
    os.mkfifo(path)
    done = threading.Event()

    def feed() -> None:
        readers = 0
        while not done.wait(0.02):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # fails while no reader has it open
            except OSError:
                continue
            os.set_blocking(fd, True)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text if readers == 0 else "")
            readers += 1

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        yield path
    finally:
        done.set()
        writer.join()


@pytest.fixture
def pipe(tmp_path) -> Callable[[str, str], contextlib.AbstractContextManager[Path]]:
    """:func:`fed_pipe` named NAME under tmp_path: ``with pipe(NAME, TEXT) as path: ...``."""
    return lambda name, text: fed_pipe(tmp_path / name, text)
