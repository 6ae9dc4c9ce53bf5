"""Analyses: swapped-word test sets, length groups, tables and plots."""

import random

import pytest

from ordo.analysis.groups import group_by_length, quantile_bounds, score_groups
from ordo.analysis.perturb import swap_sentences, swap_words
from ordo.analysis.plots import line_plot
from ordo.analysis.tables import markdown_table, write_tables
from ordo.evaluation.bleu import multi_bleu

WORDS = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]


def test_swap_moves_exactly_the_asked_share_and_keeps_the_words():
    for fraction, moved in ((0.0, 0), (0.3, 3), (0.5, 5), (1.0, 10)):
        swapped = swap_words(WORDS, fraction, random.Random(4))
        assert sorted(swapped) == WORDS
        assert sum(a != b for a, b in zip(swapped, WORDS)) == moved, fraction


def test_a_small_share_still_swaps_two_words_and_short_sentences_survive():
    assert sum(a != b for a, b in zip(swap_words(WORDS, 0.1, random.Random(0)), WORDS)) == 2
    assert swap_words(["alone"], 1.0, random.Random(0)) == ["alone"]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        swap_words(WORDS, 1.5, random.Random(0))


def test_swapped_sets_are_reproducible_and_bleu_against_the_original_falls():
    vocabulary = [f"w{k}" for k in range(100)]
    sentences = [" ".join(random.Random(i).sample(vocabulary, 12)) for i in range(50)]
    assert swap_sentences(sentences, 0.4, seed=3) == swap_sentences(sentences, 0.4, seed=3)
    scores = [multi_bleu(swap_sentences(sentences, f / 10, seed=3), sentences) for f in range(0, 11, 2)]
    assert scores[0] == pytest.approx(100.0)
    assert scores[0] > scores[1] > scores[2] > scores[3]  # 0%, 20%, 40%, 60%
    assert max(scores[4:]) < scores[2]  # a random permutation keeps a few n-grams by chance


def test_length_groups_by_quantiles_and_by_explicit_bounds():
    lengths = [3, 5, 5, 6, 7, 8, 9, 12, 15, 20]
    assert quantile_bounds(lengths, 3) == [6, 9]
    groups = group_by_length(lengths, [6, 9])
    assert [(g.label, g.indices) for g in groups] == [("3-6", [0, 1, 2, 3]), ("7-9", [4, 5, 6]), ("12-20", [7, 8, 9])]
    assert [g.label for g in group_by_length(lengths, [4, 100])] == ["3", "5-20"]


def test_scores_per_group_use_only_the_groups_sentences():
    groups = group_by_length([2, 2, 9], [5])
    hyps, refs = ["x y", "x y", "wrong"], ["x y", "x y", "right"]
    assert score_groups(groups, hyps, refs, lambda h, r: float(sum(a == b for a, b in zip(h, r)) / len(h))) == [1.0, 0.0]


def test_tables_and_plot_are_written(tmp_path):
    text = markdown_table(["system", "BLEU"], [["base", 30.123], ["new", None]])
    assert text.splitlines() == ["| system | BLEU |", "|---|---|", "| base | 30.12 |", "| new | - |"]
    write_tables(tmp_path / "t", ["system", "BLEU"], [["base", 30.123]])
    assert (tmp_path / "t.tsv").read_text().splitlines() == ["system\tBLEU", "base\t30.123"]
    png = line_plot(["0%", "50%"], {"base": [30.0, 10.0], "new": [31.0, 12.0]}, "x", "BLEU", tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    many = line_plot(["0%", "50%"], {f"system {i}": [float(i), i + 1.0] for i in range(11)}, "x", "BLEU",
                     tmp_path / "many.png")
    width = int.from_bytes(many.read_bytes()[16:20], "big")  # the PNG header's width
    assert width > int.from_bytes(png.read_bytes()[16:20], "big")  # room for the legend beside the axes


def test_length_report_counts_characters_for_unsegmented_sources(tmp_path):
    from ordo.analysis.report import length_report

    sources = ["我们走", "你好吗朋友们今天", "a b", "谢谢"]  # chars without spaces: 3, 8, 2, 2; words: 1, 1, 2, 1
    refs = ["we go now", "how are you friends today", "a b", "thanks a lot"]
    length_report([("ref", refs)], sources, refs, tmp_path, bounds=[2, 5], unit="chars")
    assert (tmp_path / "length.tsv").read_text().splitlines()[1] == "sentences\t2\t1\t1"
    length_report([("ref", refs)], sources, refs, tmp_path, bounds=[1, 5], unit="words")
    assert (tmp_path / "length.tsv").read_text().splitlines()[1] == "sentences\t3\t1"
    with pytest.raises(ValueError, match="length unit 'bytes'"):
        length_report([("ref", refs)], sources, refs, tmp_path, unit="bytes")


def test_label_fonts_add_only_installed_cjk_fallbacks(monkeypatch):
    from types import SimpleNamespace

    from matplotlib import font_manager

    from ordo.analysis.plots import label_fonts

    fonts = [SimpleNamespace(name=n) for n in ("DejaVu Sans", "IPAexGothic", "Some Latin Font")]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", fonts)
    assert label_fonts() == ["DejaVu Sans", "IPAexGothic"]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", fonts[:1])
    assert label_fonts() == ["DejaVu Sans"]


def test_order_report_buckets_add_up_and_the_reference_scores_100_in_every_bucket(tmp_path):
    from ordo.analysis.report import order_report

    refs = [f"the cat number {i} sat on the mat ." for i in range(12)]
    worse = [" ".join(reversed(r.split())) for r in refs]  # every sentence reversed
    short = [r if i < 4 else " ".join(r.split()[:-3]) for i, r in enumerate(refs)]  # 6 of 9 tokens but in the hardest
    taus = [-1.0, -0.5, 0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 0.9, 1.0, 1.0, 1.0]
    order_report([("ref", refs), ("reversed", worse), ("short", short)], refs, taus, tmp_path, tokenized=True)
    rows = [line.split("\t") for line in (tmp_path / "order.tsv").read_text().splitlines()[1:]]
    ref_rows, worse_rows, short_rows = ([r for r in rows if r[0] == name] for name in ("ref", "reversed", "short"))
    assert sum(int(r[2]) for r in ref_rows) == len(refs) and len(ref_rows) == 3
    assert all(float(r[3]) == pytest.approx(100.0) and float(r[5]) == pytest.approx(100.0) for r in ref_rows)
    assert all(float(r[5]) == 0.0 and float(r[7]) < -50 and float(r[8]) < 0.05 for r in worse_rows)
    assert [float(r[6]) for r in worse_rows] == [1.0, 1.0, 1.0]  # reordered, not shortened
    assert [round(float(r[6]), 4) for r in short_rows] == [1.0, 0.6667, 0.6667]
    assert (tmp_path / "order.png").stat().st_size > 0


def test_the_length_ratio_counts_whitespace_tokens_and_has_none_without_reference_tokens():
    from ordo.analysis.report import length_ratio

    assert length_ratio(["a b", "c"], ["a b c d", "e f"]) == 0.5
    assert length_ratio(["a b"], [""]) is None
