"""``ordo align``, ``ordo evaluate-alignment`` and ``ordo reorder`` on the synthetic pair with gold links."""

import random

import pytest

from ordo.cli import main
from ordo.data.alignment.links import read_links
from ordo.data.synthetic import LEXICON, TARGET_WORD_CLASS, generate_pair_with_alignment


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """1,500 synthetic pairs with their gold alignment as a 1-based .talp file."""
    root = tmp_path_factory.mktemp("align")
    rng = random.Random(7)
    triples = [generate_pair_with_alignment(rng) for _ in range(1500)]
    (root / "src.txt").write_text("".join(s + "\n" for s, _, _ in triples))
    (root / "tgt.txt").write_text("".join(t + "\n" for _, t, _ in triples))
    (root / "gold.talp").write_text("".join(" ".join(f"{i + 1}-{j + 1}" for i, j in a) + "\n" for _, _, a in triples))
    return root


def test_eflomal_alignment_scores_a_low_aer_against_the_gold_links(corpus, capsys):
    out = corpus / "eflomal.align"
    assert main(["align", "--src", str(corpus / "src.txt"), "--tgt", str(corpus / "tgt.txt"), "--out", str(out)]) == 0
    assert len(list(read_links(out))) == 1500
    assert main(["evaluate-alignment", "--hyp", str(out), "--gold", str(corpus / "gold.talp")]) == 0
    aer = float(capsys.readouterr().out.split("AER ")[1].split()[0])
    assert aer < 15.0


def test_intersection_trades_recall_for_precision(corpus, capsys):
    scores = {}
    for sym in ("intersection", "union"):
        out = corpus / f"{sym}.align"
        assert main(["align", "--src", str(corpus / "src.txt"), "--tgt", str(corpus / "tgt.txt"),
                     "--out", str(out), "--symmetrization", sym]) == 0
        capsys.readouterr()
        assert main(["evaluate-alignment", "--hyp", str(out), "--gold", str(corpus / "gold.talp")]) == 0
        printed = capsys.readouterr().out
        scores[sym] = {k: float(printed.split(f"{k} ")[1].split()[0]) for k in ("precision", "recall")}
    assert scores["intersection"]["precision"] > scores["union"]["precision"]
    assert scores["intersection"]["recall"] < scores["union"]["recall"]


def test_reorder_with_gold_links_puts_the_source_in_target_order(corpus, tmp_path):
    gold0 = tmp_path / "gold0.align"
    gold0.write_text("".join(" ".join(f"{i}-{j}" for i, j in sorted(links.sure)) + "\n"
                             for links in read_links(corpus / "gold.talp", one_based=True)))
    out = tmp_path / "reordered.txt"
    assert main(["reorder", "--src", str(corpus / "src.txt"), "--align", str(gold0), "--out", str(out)]) == 0
    reordered = out.read_text().splitlines()
    targets = (corpus / "tgt.txt").read_text().splitlines()
    for source, target in zip(reordered[:200], targets[:200]):
        assert [LEXICON[w] for w in source.split()] == [w for w in target.split() if TARGET_WORD_CLASS[w] != "case"]


def test_bad_alignment_files_are_clear_errors(corpus, tmp_path, capsys):
    short = tmp_path / "short.align"
    short.write_text("0-0\n")
    assert main(["reorder", "--src", str(corpus / "src.txt"), "--align", str(short), "--out", str(tmp_path / "o")]) == 2
    assert f"{corpus / 'src.txt'} has 1500 lines but {short} has 1" in capsys.readouterr().err
    bad = tmp_path / "bad.align"
    bad.write_text("0-0 99-1\n")
    one = tmp_path / "one.txt"
    one.write_text("a b\n")
    assert main(["reorder", "--src", str(one), "--align", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "bad.align:1: link 99-1 is outside a pair of 2 source words" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_an_alignment_file_one_line_short_is_an_error_naming_both_files(tmp_path, capsys):
    src, align, out = tmp_path / "src.txt", tmp_path / "short.align", tmp_path / "o"
    src.write_text("a b\nc d\n")
    align.write_text("0-1 1-0\n")
    assert main(["reorder", "--src", str(src), "--align", str(align), "--out", str(out)]) == 2
    assert f"{src} has 2 lines but {align} has 1" in capsys.readouterr().err
    assert not out.exists()


def test_align_refuses_a_source_one_line_longer_than_its_target(tmp_path, capsys):
    src, tgt, out = tmp_path / "src.txt", tmp_path / "tgt.txt", tmp_path / "o.align"
    src.write_text("a b\nc d\ne\n")
    tgt.write_text("x y\nz w\n")
    assert main(["align", "--src", str(src), "--tgt", str(tgt), "--out", str(out)]) == 2
    assert f"{src} has 3 lines but {tgt} has 2" in capsys.readouterr().err
    assert not out.exists()


def test_align_gives_no_links_to_a_pair_with_an_empty_side(tmp_path):
    src, tgt, out = tmp_path / "src.txt", tmp_path / "tgt.txt", tmp_path / "o.align"
    src.write_text("a b\nc d\n\ne f\n")
    tgt.write_text("x y\n\nz\nv w\n")
    assert main(["align", "--src", str(src), "--tgt", str(tgt), "--out", str(out)]) == 0
    links = [line.sure for line in read_links(out)]
    assert len(links) == 4 and links[1] == set() and links[2] == set() and links[0] and links[3]


def test_fast_align_gives_the_same_low_aer_links_at_every_run(corpus, capsys):
    runs = []
    for name in ("first", "second"):
        out = corpus / f"fast_align.{name}.align"
        assert main(["align", "--src", str(corpus / "src.txt"), "--tgt", str(corpus / "tgt.txt"), "--out", str(out),
                     "--aligner", "fast_align"]) == 0
        runs.append(out.read_text())
    assert runs[0] == runs[1]
    assert main(["evaluate-alignment", "--hyp", str(out), "--gold", str(corpus / "gold.talp")]) == 0
    assert float(capsys.readouterr().out.split("AER ")[1].split()[0]) < 25.0
