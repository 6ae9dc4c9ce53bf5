"""Optional dependencies (``ordo[align]``: eflomal, ``ordo[plots]``: matplotlib): the verbs that need one fail
with a one-line error naming the extra, and importing ordo needs neither."""

import subprocess
import sys

import pytest

from ordo.cli import main


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "text"
    path.write_text("a b c\nd e\n")
    return path


def test_align_without_eflomal_names_the_align_extra(monkeypatch, text, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "eflomal", None)  # import eflomal now raises ImportError
    assert main(["align", "--src", str(text), "--tgt", str(text), "--out", str(tmp_path / "out.align")]) == 2
    err = capsys.readouterr().err
    assert err == "ordo align: error: eflomal is not installed; pip install 'ordo[align]'\n"
    assert not (tmp_path / "out.align").exists()


def test_prepare_with_reorder_positions_without_eflomal_fails_before_encoding(monkeypatch, text, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "eflomal", None)
    out = tmp_path / "data"
    assert main(["prepare", "--train-src", str(text), "--train-tgt", str(text), "--out", str(out),
                 "--set", "reorder_positions=true"]) == 2
    assert "pip install 'ordo[align]'" in capsys.readouterr().err
    assert not out.exists()


def test_plotting_analysis_without_matplotlib_names_the_plots_extra(monkeypatch, text, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["analyze", "length", "--src", str(text), "--ref", str(text), "--hyp", f"a={text}",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == "ordo analyze: error: matplotlib is not installed; pip install 'ordo[plots]'\n"


def test_importing_ordo_and_its_cli_needs_neither_extra_nor_the_server():
    code = ("import sys\n"
            "sys.modules['eflomal'] = sys.modules['matplotlib'] = None\n"
            "import ordo, ordo.api, ordo.cli, ordo.demo, ordo.detail, ordo.analysis.attention_align\n"
            "ordo.cli.build_parser()\n"
            "assert not [m for m in sys.modules if m.startswith(('ordo.serve', 'fastapi', 'uvicorn'))]\n")
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
