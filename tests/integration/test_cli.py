"""The ``ordo`` verbs end to end on the synthetic reordering pair, and their errors on bad input."""

import gzip
import json

import pytest

from ordo import api
from ordo.cli import main
from ordo.data.textio import read_lines


def test_prepare_train_translate_average_evaluate(demo_data, tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "--data", str(demo_data), "--preset", "tiny", "--out", str(run),
            "--set", "train.max_steps=300", "--set", "train.valid_every=100", "--set", "train.lr=3e-3",
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


def test_evaluate_ribes_scores_order_and_its_bootstrap_sees_the_better_system(tmp_path, capsys):
    refs = [f"he read the book {i} because he was interested in history" for i in range(30)]
    shuffled = [" ".join(r.split()[5:] + r.split()[:5]) for r in refs]  # the clauses swapped
    (tmp_path / "ref").write_text("\n".join(refs) + "\n")
    (tmp_path / "same").write_text("\n".join(refs) + "\n")
    (tmp_path / "moved").write_text("\n".join(shuffled) + "\n")
    assert main(["evaluate", "--hyp", str(tmp_path / "moved"), "--ref", str(tmp_path / "ref"), "--compare",
                 str(tmp_path / "same"), "--ribes", "--tokenized-bleu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["compare"]["ribes"] == pytest.approx(100.0)
    assert 0 < report["hyp"]["ribes"] < 60  # the words are all there, their order is not
    assert report["significance"]["ribes_p_value"] < 0.01


def test_evaluate_compare_prints_sacrebleu_tests_for_three_metrics_and_the_sign_test(tmp_path, capsys):
    refs = [f"the {n} cats sat on the mat near the old house" for n in range(20)]
    (tmp_path / "ref").write_text("\n".join(refs) + "\n")
    (tmp_path / "short").write_text("\n".join(r.rsplit(" ", 4)[0] for r in refs) + "\n")
    args = ["evaluate", "--hyp", str(tmp_path / "short"), "--ref", str(tmp_path / "ref"), "--compare",
            str(tmp_path / "ref"), "--bootstrap-samples", "100", "--randomization-trials", "200", "--ribes"]
    assert main([*args, "--json"]) == 0
    tests = json.loads(capsys.readouterr().out)["significance"]["paired_tests"]
    assert list(tests) == ["BLEU", "chrF2", "TER"]
    assert all(test["bootstrap_p"] < 0.05 and test["randomization_p"] < 0.05 for test in tests.values())
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in ("BLEU", "chrF2", "TER"):
        assert any(line.split()[0] == name and "bootstrap p" in line and "randomization p" in line
                   for line in lines if line.strip())
    assert any(line.startswith("sign test over BLEU") for line in lines)
    assert any(line.startswith("paired bootstrap over RIBES") for line in lines)


def test_analyze_order_buckets_by_alignment_tau_and_checks_line_counts(tmp_path, capsys):
    refs = ["a b c d", "e f g h", "i j k l"]
    (tmp_path / "src").write_text("\n".join(refs) + "\n")
    (tmp_path / "ref").write_text("\n".join(refs) + "\n")
    (tmp_path / "align").write_text("0-0 1-1 2-2 3-3\n0-3 1-2 2-1 3-0\n0-1 1-0 2-2 3-3\n")
    common = ["analyze", "order", "--test-src", str(tmp_path / "src"), "--test-ref", str(tmp_path / "ref"), "--out",
              str(tmp_path / "out"), "--hyp", f"ref={tmp_path / 'ref'}", "--tokenized-bleu"]
    assert main([*common, "--align", str(tmp_path / "align"), "--edges=-0.5,0.9"]) == 0
    rows = [line.split("\t") for line in (tmp_path / "out" / "order.tsv").read_text().splitlines()[1:]]
    assert [r[2] for r in rows] == ["1", "1", "1"] and rows[0][1] == "τ -1.00..-1.00"
    assert (tmp_path / "out" / "difficulty.png").exists()
    (tmp_path / "short").write_text("0-0\n")
    assert main([*common, "--align", str(tmp_path / "short")]) != 0
    assert "1 lines of links for 3 test pairs" in capsys.readouterr().err
    (tmp_path / "mono").write_text("0-0 1-1 2-2 3-3\n" * 3)  # a system that keeps the source order everywhere
    assert main([*common, "--align", str(tmp_path / "align"), "--hyp-align", f"mono={tmp_path / 'mono'}"]) != 0
    assert "--hyp-align mono=" in capsys.readouterr().err  # its links are checked against mono's output
    with_mono = [*common, "--hyp", f"mono={tmp_path / 'src'}", "--align", str(tmp_path / "align")]
    assert main([*with_mono, "--hyp-align", f"mono={tmp_path / 'mono'}"]) == 0
    ref_row, mono_row = (line.split("\t") for line in (tmp_path / "out" / "order_tau.tsv").read_text().splitlines()[1:])
    assert ref_row[0] == "reference" and float(ref_row[4]) == pytest.approx(100 / 3)  # one monotone pair of 3
    assert float(ref_row[2]) == pytest.approx((1 - 1 + 2 / 3) / 3)  # τ 1, -1 and 4/6
    assert mono_row[0] == "mono" and float(mono_row[2]) == 1.0 and float(mono_row[4]) == 100.0


def test_analyze_seeds_gives_the_gain_its_interval_and_a_verdict(tmp_path, capsys):
    refs = [f"the cat number {i} sat on the mat ." for i in range(30)]
    (tmp_path / "ref").write_text("\n".join(refs) + "\n")
    for seed, cut in ((1, 3), (2, 4), (3, 5)):  # baselines drop the last words of every sentence
        (tmp_path / f"base{seed}").write_text("\n".join(" ".join(r.split()[:-cut]) for r in refs) + "\n")
    (tmp_path / "system1").write_text("\n".join(refs) + "\n")
    (tmp_path / "system2").write_text("\n".join(" ".join(r.split()[:-1]) for r in refs) + "\n")
    common = ["analyze", "seeds", "--ref", str(tmp_path / "ref"), "--out", str(tmp_path / "out"), "--tokenized-bleu"]
    bases = [arg for seed in (1, 2, 3) for arg in ("--baseline", str(tmp_path / f"base{seed}"))]
    systems = ["--system", str(tmp_path / "system1"), "--system", str(tmp_path / "system2")]
    assert main([*common, *bases, *systems, "--target-gain", "1.0"]) == 0
    assert "| gain |" in capsys.readouterr().out
    header, row = ((tmp_path / "out" / "verdict.tsv").read_text().splitlines()[i].split("\t") for i in (0, 1))
    verdict = dict(zip(header, row))
    low, high = (float(end) for end in verdict["95% interval"].strip("[]").split(", "))
    assert 0 < low < float(verdict["gain"]) < high and float(verdict["p (t-test over seeds)"]) < 0.05
    assert verdict["seeds per side for it"] != "" and float(verdict["min. detectable gain (80% power)"]) > 0
    seed_rows = [line.split("\t") for line in (tmp_path / "out" / "seeds.tsv").read_text().splitlines()[1:]]
    assert [row[0] for row in seed_rows] == ["baseline"] * 3 + ["system"] * 2
    assert seed_rows[0][1].endswith("base1") and float(seed_rows[3][2]) == pytest.approx(100.0)
    assert main([*common, *bases, *systems, "--metric", "ribes"]) == 0
    assert "baseline mean RIBES" in capsys.readouterr().out
    assert (tmp_path / "out" / "seeds.tsv").read_text().splitlines()[0].split("\t")[2] == "RIBES"
    assert main([*common, "--baseline", str(tmp_path / "base1"), "--system", str(tmp_path / "system1")]) != 0
    assert "the test needs a seed of each system and three in all" in capsys.readouterr().err
    assert main([*common, *bases, *systems, "--target-gain", "-1"]) != 0
    assert "target gain -1.0" in capsys.readouterr().err
    (tmp_path / "short").write_text("one line\n")
    assert main([*common, *bases, "--system", str(tmp_path / "system1"), "--system", str(tmp_path / "short")]) != 0
    assert "short" in capsys.readouterr().err  # the file that does not match the references is named


def test_translate_with_beam_zero_is_refused_naming_the_setting(trained_run, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("a b c\n")
    assert main(["translate", "--model", str(trained_run), "--checkpoint", "last", "--input",
                 str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.txt"), "--beam", "0"]) != 0
    assert "decode.beam_size: 0 is below its minimum 1" in capsys.readouterr().err
    assert not (tmp_path / "out.txt").exists()
    from ordo.errors import ConfigError

    with pytest.raises(ConfigError, match="decode.beam_size"):
        api.load_run(trained_run, "last").translate(["a b"], beam_size=0)


@pytest.mark.parametrize("content", [b"not gzip at all\n", gzip.compress(b"a b c\n" * 300, mtime=0)[:-20]],
                         ids=["not_gzip", "truncated_gzip"])
def test_a_broken_gz_is_one_error_line_naming_the_file(tmp_path, capsys, content):
    (tmp_path / "hyp.txt").write_text("a b c\n")
    (tmp_path / "ref.txt.gz").write_bytes(content)
    assert main(["evaluate", "--hyp", str(tmp_path / "hyp.txt"), "--ref", str(tmp_path / "ref.txt.gz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ordo evaluate: error: ") and "ref.txt.gz:" in err and err.count("\n") == 1


def test_evaluate_reads_references_from_a_pipe_with_a_byte_order_mark(tmp_path, capsys):
    import os
    import threading

    (tmp_path / "hyp.txt").write_text("Ein Hund läuft .\n")
    fifo = tmp_path / "ref_pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes("\ufeffEin Hund läuft .\n".encode()))
    writer.start()
    assert main(["evaluate", "--hyp", str(tmp_path / "hyp.txt"), "--ref", str(fifo), "--json"]) == 0
    writer.join()
    assert json.loads(capsys.readouterr().out)["hyp"]["bleu"] == pytest.approx(100.0)


def test_evaluate_compare_and_analyze_seeds_read_a_piped_reference_once(tmp_path, capsys, pipe):
    refs = [f"the {n} cats sat on the mat near the old house" for n in range(20)]
    text = "\n".join(refs) + "\n"
    (tmp_path / "ref").write_text(text)
    (tmp_path / "short").write_text("\n".join(r.rsplit(" ", 4)[0] for r in refs) + "\n")
    (tmp_path / "shorter").write_text("\n".join(r.rsplit(" ", 5)[0] for r in refs) + "\n")
    with pipe("ref_pipe", text) as piped:  # the README's --ref <(zcat ...)
        assert main(["evaluate", "--hyp", str(tmp_path / "short"), "--ref", str(piped), "--compare",
                     str(tmp_path / "ref"), "--bootstrap-samples", "50", "--randomization-trials", "50", "--ribes",
                     "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["compare"]["bleu"] == pytest.approx(100.0) and report["hyp"]["bleu"] < 80
    assert report["compare"]["ribes"] == pytest.approx(100.0)
    with pipe("seeds_ref_pipe", text) as piped:
        assert main(["analyze", "seeds", "--ref", str(piped), "--baseline", str(tmp_path / "shorter"), "--baseline",
                     str(tmp_path / "short"), "--system", str(tmp_path / "ref"), "--out", str(tmp_path / "seeds")]) == 0
    assert "gain" in (tmp_path / "seeds" / "verdict.md").read_text()
