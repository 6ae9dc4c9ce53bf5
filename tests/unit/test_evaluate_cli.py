"""``ordo evaluate`` and ``ordo evaluate-alignment`` on bad input and odd flags: each is an error naming the flag
or the files, never a silent result over other lines than the user meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from ordo.cli import main


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("flag", ["--bootstrap-samples", "--randomization-trials"])
@pytest.mark.parametrize("value", ["0", "-3"])
def test_a_sample_count_below_one_is_refused_by_its_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    hyp = _write(tmp_path / "hyp", ["the cat sat on the mat ."])
    with pytest.raises(SystemExit) as stopped:
        main(["evaluate", "--hyp", hyp, "--ref", hyp, "--compare", hyp, flag, value])
    assert stopped.value.code == 2
    assert f"argument {flag}: {value} is below its minimum 1" in capsys.readouterr().err


@pytest.fixture
def gold(tmp_path: Path) -> str:
    """Three sentences of 1-based gold links, the second with a possible link."""
    return _write(tmp_path / "gold.talp", ["1-1 2-2", "1-2 2p1", "3-3"])


def test_alignments_of_another_line_count_are_named(tmp_path: Path, gold: str, capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    longer = _write(tmp_path / "all.align", ["0-0 1-1", "0-1", "2-2", "0-0", "1-1"])  # training lines after the gold's
    shorter = _write(tmp_path / "short.align", ["0-0 1-1"])
    for hyp, count in ((longer, 5), (shorter, 1)):
        assert main(["evaluate-alignment", "--hyp", hyp, "--gold", gold]) == 2
        assert f"evaluate-alignment: error: {hyp} has {count} lines but {gold} has 3" in capsys.readouterr().err


def test_first_scores_the_first_lines_of_both_files(tmp_path: Path, gold: str, capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    hyp = _write(tmp_path / "hyp.align", ["0-0 1-1", "0-1", "0-0", "5-5"])
    assert main(["evaluate-alignment", "--hyp", hyp, "--gold", gold, "--first", "2"]) == 0
    assert capsys.readouterr().out == "AER 0.00  precision 100.00  recall 100.00  (2 sentences)\n"
    assert main(["evaluate-alignment", "--hyp", hyp, "--gold", gold, "--first", "4"]) == 2
    assert f"error: {gold} has 3 lines, fewer than the first 4 to score" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-1"])
def test_first_below_one_is_refused(gold: str, capsys: pytest.CaptureFixture[str], value: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["evaluate-alignment", "--hyp", gold, "--gold", gold, "--first", value])
    assert stopped.value.code == 2
    assert f"argument --first: {value} is below its minimum 1" in capsys.readouterr().err


def test_gold_links_without_a_sure_one_name_the_gold_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gold = _write(tmp_path / "possible.talp", ["1p1", ""])
    hyp = _write(tmp_path / "hyp.align", ["0-0", ""])
    assert main(["evaluate-alignment", "--hyp", hyp, "--gold", gold]) == 2
    assert f"error: {gold}: the gold alignments have no sure links" in capsys.readouterr().err
