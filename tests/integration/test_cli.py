"""The ``ordo`` verbs end to end on the synthetic reordering pair, and their errors on bad input."""

import gzip

import pytest

from ordo.cli import main
from ordo.data.textio import read_lines


def test_prepare_train_translate_average_evaluate(demo_data, tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "--data", str(demo_data), "--preset", "tiny", "--out", str(run),
            "--set", "train.max_steps=500", "--set", "train.valid_every=250", "--set", "train.lr=3e-3",
            "--set", "train.warmup_steps=100", "--set", "train.max_tokens=1500", "--set", "train.progress=false",
            "--set", "train.valid_max_sentences=30", "--set", "train.threads=2"]
    assert main(args) == 0
    assert (run / "config.yaml").exists() and (run / "model_info.yaml").exists()
    assert main(["average", "--model", str(run), "--last", "2"]) == 0
    hyp = tmp_path / "test.hyp"
    src = demo_data / "test.src.txt"
    assert main(["translate", "--model", str(run), "--checkpoint", "averaged", "--input", str(src),
                 "--output", str(hyp), "--beam", "4"]) == 0
    assert len(read_lines(hyp)) == len(read_lines(src))
    greedy = tmp_path / "greedy.hyp"
    assert main(["translate", "--model", str(run), "--input", str(src), "--output", str(greedy), "--greedy"]) == 0
    capsys.readouterr()
    ref = demo_data / "test.tgt.txt"
    assert main(["evaluate", "--hyp", str(hyp), "--ref", str(ref), "--compare", str(greedy), "--json"]) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["hyp"]["bleu"] > 40.0, report


def test_nbest_output_format(demo_data, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--data", str(demo_data), "--preset", "tiny", "--out", str(run), "--set", "train.max_steps=3",
                 "--set", "train.valid_every=3", "--set", "train.progress=false", "--set", "train.valid_bleu=false"]) == 0
    src = tmp_path / "in.txt"
    src.write_text("the dog sees a cat .\n")
    out = tmp_path / "nbest.txt"
    assert main(["translate", "--model", str(run), "--input", str(src), "--output", str(out), "--nbest", "3",
                 "--beam", "4", "--max-len-b", "5"]) == 0
    lines = read_lines(out)
    assert len(lines) == 3 and all(line.startswith("0 ||| ") for line in lines)
    scores = [float(line.rsplit("|||", 1)[1]) for line in lines]
    assert scores == sorted(scores, reverse=True)
    src.write_text("the dog .\n" + " ".join(["dog"] * 1100) + "\n")
    capsys.readouterr()
    assert main(["translate", "--model", str(run), "--input", str(src), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "in.txt:2:" in err and "max_positions" in err


def write_gz(path, lines: bytes):
    with gzip.open(path, "wb") as handle:
        handle.write(lines)


@pytest.mark.parametrize(
    "src_bytes, tgt_bytes, message",
    [
        (b"a b\nc d\n", b"x\n", "has 2 lines but"),
        (b"a b\n\xff\xfe\n", b"x\ny\n", "src.gz:2: invalid UTF-8"),
        (b"a b\n\nc\n", b"x\ny\nz\n", "src.gz:2: empty line"),
    ],
)
def test_prepare_rejects_bad_input_naming_file_and_line(tmp_path, capsys, src_bytes, tgt_bytes, message):
    write_gz(tmp_path / "src.gz", src_bytes)
    write_gz(tmp_path / "tgt.gz", tgt_bytes)
    code = main(["prepare", "--train-src", str(tmp_path / "src.gz"), "--train-tgt", str(tmp_path / "tgt.gz"),
                 "--out", str(tmp_path / "data"), "--vocab-size", "20"])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "data" / "data.yaml").exists()


def test_unknown_config_key_and_missing_run(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "r"), "--set", "train.warmup=5", "--data", "x"]) == 2
    assert "did you mean warmup_steps" in capsys.readouterr().err
    assert main(["translate", "--model", str(tmp_path / "nothing")]) == 2
    assert "not an ordo run directory" in capsys.readouterr().err


def test_evaluate_line_count_mismatch(tmp_path, capsys):
    (tmp_path / "h").write_text("a\nb\n")
    (tmp_path / "r").write_text("a\n")
    assert main(["evaluate", "--hyp", str(tmp_path / "h"), "--ref", str(tmp_path / "r")]) == 2
    assert "lines" in capsys.readouterr().err
