"""``ordo analyze`` on two tiny trained systems: tables, plots, outputs, and errors."""

import pytest

from ordo import api
from ordo.build import count_parameters
from ordo.cli import main
from ordo.config import load_config
from ordo.data.textio import read_lines, read_yaml

TINY = ["model.preset=tiny", "model.d_model=32", "model.ffn_dim=64", "train.max_tokens=400", "train.max_steps=30",
        "train.valid_every=30", "train.progress=false", "train.valid_bleu=false", "train.threads=2"]


@pytest.fixture(scope="module")
def runs(small_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("analyze")
    for name, extra in (("base", []), ("both", ["model.methods.reorder_emb.variant=both"])):
        api.train(load_config(None, [f"data={small_data}", *TINY, *extra]), root / name)
    return root


def test_systems_table_has_speed_parameters_and_a_sign_test(runs, small_data, tmp_path, capsys):
    src, ref = small_data / "test.src.txt", small_data / "test.tgt.txt"
    assert main(["analyze", "systems", "--src", str(src), "--ref", str(ref), "--out", str(tmp_path),
                 "--run", f"base={runs / 'base'}", "--run", f"both={runs / 'both'}", "--beam", "2"]) == 0
    header, base, both = (line.split("\t") for line in (tmp_path / "systems.tsv").read_text().splitlines())
    assert header[:5] == ["system", "BLEU", "tok BLEU", "sign p vs base", "params"]
    assert base[3] == "" and 0.0 <= float(both[3]) <= 1.0
    params = read_yaml(runs / "both" / "model_info.yaml")["parameters"]  # counted when training started
    assert params > 0 and count_parameters(api.load_run(runs / "both", "best", "cpu").model) == params
    assert both[4] == f"{params / 1e6:.2f}M"
    assert int(both[5]) == 30 and float(both[7]) > 0 and float(both[8]) > 0  # updates, training tokens/s
    assert header[7:9] == ["train src tok/s", "train tgt tok/s"]
    assert len(read_lines(tmp_path / "both.hyp")) == len(read_lines(src))
    assert "| both |" in capsys.readouterr().out


def test_robustness_and_length_reports(runs, small_data, tmp_path):
    src, ref = small_data / "test.src.txt", small_data / "test.tgt.txt"
    assert main(["analyze", "robustness", "--src", str(src), "--ref", str(ref), "--out", str(tmp_path),
                 "--run", f"base={runs / 'base'}", "--step", "50", "--beam", "1"]) == 0
    rows = (tmp_path / "robustness.tsv").read_text().splitlines()
    assert rows[0] == "system\t0%\t50%\t100%" and rows[1].startswith("base\t")
    assert (tmp_path / "robustness.png").stat().st_size > 1000
    assert main(["analyze", "length", "--src", str(src), "--ref", str(ref), "--out", str(tmp_path),
                 "--hyp", f"ref={ref}", "--groups", "3"]) == 0
    table = (tmp_path / "length.tsv").read_text().splitlines()
    assert table[0].startswith("system\t") and len(table[0].split("\t")) == 4
    assert [float(x) for x in table[2].split("\t")[1:]] == pytest.approx([100.0] * 3)  # the reference scores 100
    assert sum(int(x) for x in table[1].split("\t")[1:]) == len(read_lines(src))


def test_bad_named_argument_is_a_clear_error(small_data, tmp_path, capsys):
    src = str(small_data / "test.src.txt")
    assert main(["analyze", "length", "--src", src, "--ref", src, "--out", str(tmp_path), "--hyp", "noname"]) == 2
    assert "--hyp noname: expected NAME=PATH" in capsys.readouterr().err


def test_a_system_name_given_twice_is_refused_rather_than_one_system_dropped(small_data, tmp_path, capsys):
    src = str(small_data / "test.src.txt")
    assert main(["analyze", "length", "--src", src, "--ref", src, "--out", str(tmp_path), "--hyp", f"a={src}",
                 "--hyp", f"a={small_data / 'test.tgt.txt'}"]) == 2
    assert "--hyp a=" in (err := capsys.readouterr().err) and "the name 'a' is given twice" in err
    assert not (tmp_path / "length.tsv").exists()


@pytest.mark.parametrize("analysis, flags, message", [
    ("length", ["--groups", "0"], "argument --groups: 0 is below its minimum 1"),
    ("length", ["--bounds", "10,x"], "argument --bounds: expected comma-separated ints, got '10,x'"),
    ("order", ["--align", "links.txt", "--edges=-0.2,high"],
     "argument --edges: expected comma-separated floats, got '-0.2,high'"),
    ("order", ["--align", "links.txt", "--edges=-0.2,nan"],
     "argument --edges: expected comma-separated floats, got '-0.2,nan'"),
    ("order", ["--align", "links.txt", "--edges=inf"], "argument --edges: expected comma-separated floats, got 'inf'"),
    ("robustness", ["--run", "a=run", "--step", "0"], "argument --step: 0 is below its minimum 1"),
    ("robustness", ["--run", "a=run", "--step", "-10"], "argument --step: -10 is below its minimum 1"),
])
def test_bad_numbers_are_usage_errors_naming_the_flag(tmp_path, capsys, analysis, flags, message):
    hyp = [] if analysis == "robustness" else ["--hyp", "a=out.txt"]
    with pytest.raises(SystemExit) as exit_:
        main(["analyze", analysis, "--src", "src.txt", "--ref", "ref.txt", "--out", str(tmp_path), *hyp, *flags])
    assert exit_.value.code == 2
    assert f"ordo analyze {analysis}: error: {message}" in capsys.readouterr().err
