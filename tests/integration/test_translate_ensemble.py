"""``ordo translate --model A --model B``: the ensemble of two trained runs, one output line per input line; runs
of different vocabularies are refused naming both."""

from pathlib import Path

import pytest

from ordo import api
from ordo.cli import main
from ordo.config import load_config
from ordo.data.textio import read_lines
from ordo.decoding.ensemble import Ensemble
from ordo.errors import ConfigError

LINES = ["the dog sees a cat .", "", "a cat runs .", "the cat sees the dog ."]


@pytest.fixture(scope="module")
def second_run(small_data, tmp_path_factory) -> Path:
    """Another tiny run on ``small_data`` (same vocabulary as ``trained_run``, another model: 3 updates), trained
    once for the module."""
    run = tmp_path_factory.mktemp("ensemble") / "second"
    api.train(load_config(None, [f"data={small_data}", "model.preset=tiny", "model.d_model=32", "model.ffn_dim=64",
                                 "train.max_tokens=400", "train.max_steps=3", "train.valid_every=3",
                                 "train.progress=false", "train.valid_bleu=false", "train.device=cpu"]), run)
    return run


@pytest.fixture
def other_vocab_run(demo_data, train_tiny_on, tmp_path) -> Path:
    """A tiny run on ``demo_data``, whose vocabulary (300 pieces) is not ``small_data``'s (3 updates)."""
    train_tiny_on(demo_data, 3, "train.device=cpu", name="other")
    return tmp_path / "other"


def translate(runs: list[Path], tmp_path: Path, *flags: str) -> int:
    """``ordo translate`` with one ``--model`` per run over LINES into ``tmp_path / out.txt``."""
    src = tmp_path / "in.txt"
    src.write_text("".join(line + "\n" for line in LINES))
    models = [arg for run in runs for arg in ("--model", str(run))]
    return main(["translate", *models, "--checkpoint", "last", "--input", str(src), "--output",
                 str(tmp_path / "out.txt"), "--max-len-b", "6", *flags])


@pytest.mark.parametrize("flags", [(), ("--greedy",), ("--nbest", "2")])
def test_two_runs_translate_as_an_ensemble_line_for_line(trained_run, second_run, tmp_path, flags):
    assert translate([trained_run, second_run], tmp_path, *flags) == 0
    out = read_lines(tmp_path / "out.txt")
    if flags[:1] == ("--nbest",):
        numbers = [str(i) for i, line in enumerate(LINES) for _ in range(2 if line else 1)]  # a blank line: one entry
        assert [line.split(" ||| ")[0] for line in out] == numbers
    else:
        assert len(out) == len(LINES) and out[1] == "" and out[0]


def test_runs_of_different_vocabularies_stop_naming_both(trained_run, other_vocab_run, tmp_path, capsys):
    assert translate([trained_run, other_vocab_run], tmp_path) == 2
    err = capsys.readouterr().err
    assert str(trained_run) in err and str(other_vocab_run) in err and "vocabular" in err
    assert not (tmp_path / "out.txt").exists()


def test_the_api_ensemble_is_the_first_runs_with_both_models(trained_run, second_run):
    run = api.load_ensemble([trained_run, second_run], "last", "cpu")
    assert isinstance(run.model, Ensemble) and len(run.model.members) == 2
    assert run.cfg.decode == api.load_run(trained_run, "last", "cpu").cfg.decode
    assert len(run.translate(LINES, beam_size=2)) == len(LINES)
    with pytest.raises(ConfigError, match="one model's attention"):
        run.translate_detailed(LINES[:1])
    assert not isinstance(api.load_ensemble([trained_run], "last", "cpu").model, Ensemble)
