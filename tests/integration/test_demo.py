"""``ordo demo`` is reproducible: the same seed gives the same translations and BLEU."""

import pytest

from ordo.cli import main
from ordo.data.textio import read_lines
from ordo.demo import run_demo


def test_same_seed_same_result(tmp_path):
    first = run_demo(tmp_path / "a", seed=4, train_size=600, max_steps=10)
    second = run_demo(tmp_path / "b", seed=4, train_size=600, max_steps=10)
    assert first == second
    assert read_lines(tmp_path / "a" / "test.hyp") == read_lines(tmp_path / "b" / "test.hyp")
    assert len(read_lines(tmp_path / "a" / "test.hyp")) == 300



def test_a_negative_train_size_is_refused_by_the_parser(tmp_path, capsys):
    """Before, a traceback from the corpus generator."""
    with pytest.raises(SystemExit):
        main(["demo", "--out", str(tmp_path / "demo"), "--train-size", "-5"])
    assert "argument --train-size: -5 is below its minimum 1" in capsys.readouterr().err


def test_a_negative_time_cap_is_refused_before_anything_is_written(tmp_path, capsys):
    """Before, ``--minutes -1`` trained without a cap."""
    assert main(["demo", "--out", str(tmp_path / "demo"), "--minutes", "-1"]) == 2
    assert "train.max_minutes: -1.0 is below its minimum 0" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()
