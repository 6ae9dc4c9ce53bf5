"""``ordo translate`` and the API keep one output line per input line, in order, whatever the input holds:
blank lines, over-long lines, standard input, int8, n-best; and they stream their output chunk by chunk."""

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ordo import api
from ordo.cli import main
from ordo.data.textio import read_lines

LONG = " ".join(["dog"] * 1100)  # more pieces than model.max_positions - 1 = 1023
LINES = ["the dog sees a cat .", "", "   ", LONG, "a cat runs .", "\t"]


def translate_cli(run: Path, tmp_path: Path, *flags: str, lines: list[str] = LINES) -> list[str]:
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(line + "\n" for line in lines))
    assert main(["translate", "--model", str(run), "--checkpoint", "last", "--input", str(src), "--output",
                 str(out), "--max-len-b", "6", *flags]) == 0
    return read_lines(out)


@pytest.mark.parametrize("flags", [(), ("--int8",), ("--greedy",)])
def test_blank_lines_give_empty_lines_and_a_long_line_is_cut_with_a_warning(trained_run, tmp_path, caplog, flags):
    with caplog.at_level("WARNING"):
        out = translate_cli(trained_run, tmp_path, *flags)
    assert len(out) == len(LINES)
    assert [out[i] for i in (1, 2, 5)] == ["", "", ""]
    assert all(out[i] for i in (0, 3, 4))
    assert "in.txt:4: 1100 pieces, cut to model.max_positions-1=1023" in caplog.text
    if "--int8" not in flags:  # dynamic int8 scales activations over the whole batch, so batch-mates matter
        alone = translate_cli(trained_run, tmp_path, *flags, lines=[LINES[0], LINES[4]])
        assert [out[0], out[4]] == alone  # the blank and long lines change nothing for the others


def test_nbest_gives_one_empty_entry_for_a_blank_line(trained_run, tmp_path):
    out = translate_cli(trained_run, tmp_path, "--nbest", "2", "--beam", "3", lines=["the dog .", "", "a cat ."])
    numbers = [int(line.split(" ||| ")[0]) for line in out]
    assert numbers == [0, 0, 1, 2, 2]
    assert out[2] == "1 |||  ||| 0.0000"


def test_long_lines_error_stops_naming_the_line(trained_run, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("the dog .\n" + LONG + "\n")
    assert main(["translate", "--model", str(trained_run), "--checkpoint", "last", "--input", str(src),
                 "--output", str(tmp_path / "out.txt"), "--long-lines", "error"]) == 2
    err = capsys.readouterr().err
    assert "in.txt:2: 1100 pieces, more than model.max_positions-1=1023" in err
    assert not (tmp_path / "out.txt").exists()  # the output is written whole or not at all


def test_chunks_give_the_same_lines_as_one_pass_and_stdin_numbers_lines_across_chunks(
        trained_run, tmp_path, monkeypatch, capsys, caplog):
    whole = translate_cli(trained_run, tmp_path)
    assert translate_cli(trained_run, tmp_path, "--buffer-lines", "2") == whole
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("".join(x + "\n" for x in LINES).encode())))
    capsys.readouterr()
    with caplog.at_level("WARNING"):
        assert main(["translate", "--model", str(trained_run), "--checkpoint", "last", "--max-len-b", "6",
                     "--buffer-lines", "2"]) == 0
    assert capsys.readouterr().out.splitlines() == whole
    assert "<stdin>:4: 1100 pieces" in caplog.text


def test_the_api_gives_empty_for_blank_and_cuts_long_sentences(trained_run):
    run = api.load_run(trained_run, "last")
    out = run.translate(LINES, max_len_b=6)
    assert len(out) == len(LINES) and out[1] == out[2] == out[5] == "" and out[3]
    from ordo.errors import InputError

    with pytest.raises(InputError, match="input:4: 1100 pieces"):
        run.translate(LINES, long_lines="error")


def test_the_api_refuses_a_string_in_place_of_a_list_of_sentences(small_data):
    """A notebook's ``run.translate("a sentence")`` would otherwise translate each character as a sentence."""
    from ordo.config import load_config
    from ordo.data.corpus import DataMeta, load_vocabs
    from ordo.errors import InputError

    cfg = load_config(None, [f"data={small_data}", "model.preset=tiny", "model.d_model=32", "model.ffn_dim=64"])
    meta = DataMeta.load(small_data)
    model = api.build_for_data(cfg, meta).model.eval()  # untrained: only the inputs are checked here
    run = api.LoadedRun(model, cfg, *load_vocabs(small_data, meta), torch.device("cpu"))
    assert len(run.translate(["the dog sees a cat .", ""], max_len_b=2)) == 2
    with pytest.raises(InputError, match=r"input: expected a list of sentences, got one str \(wrap it"):
        run.translate("the dog sees a cat .")
    with pytest.raises(InputError, match="input: expected a list of sentences, got one str"):
        run.translate_detailed("the dog sees a cat .")
    with pytest.raises(InputError, match="input:2: expected a string, got NoneType"):
        run.translate(["the dog sees a cat .", None])


def test_each_chunk_is_written_before_the_input_ends(trained_run):
    """A child ``ordo translate`` reading a pipe answers the first line while the pipe is still open."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen([sys.executable, "-m", "ordo", "translate", "--model", str(trained_run), "--checkpoint",
                              "last", "--buffer-lines", "1", "--max-len-b", "4"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        child.stdin.write(b"the dog sees a cat .\n")
        child.stdin.flush()
        first = child.stdout.readline()  # blocks until the child has written the line: the pipe is still open
        assert first.strip()
        child.stdin.write(b"\n")
        child.stdin.close()
        assert child.stdout.read() == b"\n"
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()


@pytest.mark.parametrize("flags, message", [
    (["--nbest", "3", "--beam", "2"], "decode.nbest: 3 hypotheses from a beam of 2"),
    (["--nbest", "2", "--greedy"], "decode.nbest: 2 hypotheses from a beam of 1"),
    (["--buffer-lines", "0"], "--buffer-lines: 0 is below its minimum 1"),
])
def test_impossible_decoding_flags_are_one_line_errors(trained_run, tmp_path, capsys, flags, message):
    (tmp_path / "in.txt").write_text("the dog .\n")
    assert main(["translate", "--model", str(trained_run), "--checkpoint", "last", "--input",
                 str(tmp_path / "in.txt"), *flags]) == 2
    err = capsys.readouterr().err
    assert err == f"ordo translate: error: {message}\n"
