"""``ordo score``: log P(target | source) of given translations under a trained run, one line per pair, streamed
in chunks; a word-order probe (the references against their words reversed); broken inputs stop naming the
file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ordo.cli import main
from ordo.data.textio import read_lines
from ordo.errors import ConfigError


@pytest.fixture(scope="module")
def test_pairs(small_data) -> tuple[Path, Path]:
    """The source and reference files of ``small_data``'s test text (60 pairs)."""
    text = small_data.parent / "text"
    return text / "test.src", text / "test.tgt"


def score(run: Path, src: Path, tgt: Path, out: Path, *flags: str) -> int:
    """``ordo score`` of ``run``'s last checkpoint on the pair of files into ``out``."""
    return main(["score", "--model", str(run), "--checkpoint", "last", "--src", str(src), "--tgt", str(tgt),
                 "--output", str(out), "--device", "cpu", *flags])


def test_scores_one_line_per_pair_as_the_api_does_in_any_chunking(trained_run, loaded_run, test_pairs, tmp_path,
                                                                     capsys):
    src, tgt = test_pairs
    out = tmp_path / "scores.txt"
    assert score(trained_run, src, tgt, out, "--buffer-lines", "7") == 0
    written = [float(line) for line in read_lines(out)]
    wanted = loaded_run.score(read_lines(src), read_lines(tgt))
    assert written == pytest.approx([s.log_prob for s in wanted], abs=1e-3)
    assert all(value < 0 for value in written)
    summary = capsys.readouterr().err
    assert f"60 pairs, {sum(s.tokens for s in wanted)} target tokens" in summary and "perplexity" in summary
    assert score(trained_run, src, tgt, out, "--normalize") == 0
    assert [float(line) for line in read_lines(out)] == pytest.approx([s.per_token for s in wanted], abs=1e-3)


def test_a_run_ensembled_with_itself_scores_as_the_run(trained_run, test_pairs, tmp_path):
    """Two ``--model`` flags score under the ensemble (the mean probability per token): of one run twice, the
    run's own scores."""
    src, tgt = test_pairs
    assert score(trained_run, src, tgt, tmp_path / "one.txt") == 0
    assert score(trained_run, src, tgt, tmp_path / "two.txt", "--model", str(trained_run)) == 0
    one, two = ([float(line) for line in read_lines(tmp_path / name)] for name in ("one.txt", "two.txt"))
    assert len(two) == 60 and two == pytest.approx(one, abs=1e-3)


def test_a_trained_model_prefers_the_references_word_order(trained_run, test_pairs, tmp_path):
    """The word-order probe: every reference scores higher than its own words in reverse order, on average by a
    wide margin, even after 200 updates."""
    src, tgt = test_pairs
    reversed_tgt = tmp_path / "reversed.tgt"
    reversed_tgt.write_text("".join(" ".join(line.split()[::-1]) + "\n" for line in read_lines(tgt)), encoding="utf-8")
    assert score(trained_run, src, tgt, tmp_path / "ref.txt") == 0
    assert score(trained_run, src, reversed_tgt, tmp_path / "rev.txt") == 0
    ref, rev = ([float(line) for line in read_lines(tmp_path / name)] for name in ("ref.txt", "rev.txt"))
    assert sum(r > v for r, v in zip(ref, rev)) >= 0.9 * len(ref)
    assert sum(ref) / len(ref) > sum(rev) / len(rev) + 5


def test_files_of_different_lengths_stop_naming_both(trained_run, test_pairs, tmp_path, capsys):
    src, tgt = test_pairs
    short = tmp_path / "short.tgt"
    short.write_text("".join(line + "\n" for line in read_lines(tgt)[:59]), encoding="utf-8")
    out = tmp_path / "scores.txt"
    assert score(trained_run, src, short, out) == 2
    err = capsys.readouterr().err
    assert f"{short} ends after line 59 but {src} goes on" in err
    assert not out.exists()  # nothing half-written


def test_invalid_utf8_and_over_long_lines_name_their_file_and_line(trained_run, test_pairs, tmp_path, capsys):
    src, tgt = test_pairs
    broken = tmp_path / "broken.tgt"
    lines = [line.encode() for line in read_lines(tgt)]
    lines[4] = b"\xff\xfe" + lines[4]
    broken.write_bytes(b"".join(line + b"\n" for line in lines))
    assert score(trained_run, src, broken, tmp_path / "out.txt") == 2
    assert f"{broken}:5" in capsys.readouterr().err
    long_tgt = tmp_path / "long.tgt"
    texts = read_lines(tgt)
    texts[2] = " ".join([texts[2]] * 200)
    long_tgt.write_text("".join(line + "\n" for line in texts), encoding="utf-8")
    assert score(trained_run, src, long_tgt, tmp_path / "out.txt") == 2
    assert f"{long_tgt}:3: " in capsys.readouterr().err


def test_the_api_refuses_lists_of_different_lengths(loaded_run):
    with pytest.raises(ConfigError, match="source has 2 lines but target has 1"):
        loaded_run.score(["a", "b"], ["c"])


def test_analyze_contrastive_ranks_the_references_word_order_first(trained_run, test_pairs, tmp_path):
    """``ordo analyze contrastive``: a row per system and variant kind, the trained run preferring nearly every
    reference to its reversed words; the same run twice is no different from itself (McNemar p 1)."""
    src, tgt = test_pairs
    out = tmp_path / "probe"
    runs = ["--run", f"first={trained_run}", "--run", f"again={trained_run}"]
    assert main(["analyze", "contrastive", "--src", str(src), "--ref", str(tgt), "--out", str(out), *runs,
                 "--checkpoint", "last", "--device", "cpu"]) == 0
    rows = [line.split("\t") for line in (out / "contrastive.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    assert [(row[0], row[1]) for row in rows] == [(name, kind) for name in ("first", "again")
                                                  for kind in ("swap", "move", "reverse")]
    by_kind = {row[1]: row for row in rows if row[0] == "first"}
    assert float(by_kind["reverse"][3]) >= 90 and int(by_kind["reverse"][2]) == 60
    assert all(row[6] == "1" for row in rows if row[0] == "again")
    margins = [line.split("\t") for line in read_lines(out / "contrastive_margins.tsv")]
    assert margins[0] == ["line", "variant", "first", "again"]
    reversed_margins = [float(row[2]) for row in margins[1:] if row[1] == "reverse"]
    assert len(reversed_margins) == 60
    assert 100 * sum(m > 0 for m in reversed_margins) / 60 == pytest.approx(float(by_kind["reverse"][3]))
    assert all(row[2] == row[3] for row in margins[1:])  # the same run twice
    reversed_lines = read_lines(out / "contrastive_reverse.txt")
    assert len(reversed_lines) == 60 and reversed_lines[0].split() == read_lines(tgt)[0].split()[::-1]


def test_analyze_contrastive_with_an_alignment_adds_the_source_order_variant(trained_run, test_pairs, tmp_path,
                                                                               capsys):
    """Links that cross each reference's first and last words with the source's ends make the source-order
    variant exchange those two words: one for every pair whose ends differ; a links file of another length stops
    naming it. Two runs under one name are its seeds: contrastive_seeds compares the systems over them."""
    src, tgt = test_pairs
    sources, refs = read_lines(src), read_lines(tgt)
    align = tmp_path / "test.align"
    align.write_text("".join(f"0-{len(ref.split()) - 1} {len(source.split()) - 1}-0\n"
                             for source, ref in zip(sources, refs)), encoding="utf-8")
    out = tmp_path / "probe"
    args = ["analyze", "contrastive", "--src", str(src), "--ref", str(tgt), "--out", str(out),
            "--run", f"base={trained_run}", "--run", f"base={trained_run}", "--run", f"same={trained_run}",
            "--checkpoint", "last", "--device", "cpu"]
    assert main([*args, "--align", str(align)]) == 0
    variants = read_lines(out / "contrastive_source-order.txt")
    changed = [i for i, ref in enumerate(refs) if len(ref.split()) > 1 and ref.split()[0] != ref.split()[-1]]
    assert [i for i, text in enumerate(variants) if text] == changed
    first = refs[changed[0]].split()
    assert variants[changed[0]].split() == [first[-1], *first[1:-1], first[0]]
    rows = [line.split("\t") for line in (out / "contrastive.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    kinds = ["swap", "move", "reverse", "source-order"]
    assert [(row[0], row[1]) for row in rows] == [(name, kind) for name in ("base:1", "base:2", "same")
                                                  for kind in kinds]
    assert int(rows[3][2]) == len(changed)
    seeds = [line.split("\t") for line in (out / "contrastive_seeds.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    assert [(row[0], row[1], row[2]) for row in seeds] == [(name, kind, runs) for name, runs in (("base", "2"),
                                                                                                 ("same", "1"))
                                                           for kind in kinds]
    assert all(row[4] == "+0.00 [+0.00, +0.00]" and row[5] == "1" for row in seeds[4:])  # one model thrice
    align.write_text("0-0\n", encoding="utf-8")
    assert main([*args, "--align", str(align)]) == 2
    assert f"{align}: 1 lines of links for 60 test pairs" in capsys.readouterr().err
