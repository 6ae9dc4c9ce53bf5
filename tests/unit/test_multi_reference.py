"""BLEU against several references (the NIST Zh->En test sets have four): ``corpus_scores``, ``multi_bleu`` and
``score_files`` with reference streams, and ``ordo evaluate`` with repeated ``--ref``."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU, CHRF

from ordo.cli import main
from ordo.errors import InputError
from ordo.evaluation.bleu import corpus_scores, multi_bleu, reference_streams, score_files

WORDS = ["the", "a", "cat", "dog", "mat", "house", "sat", "ran", "saw", "under", "over", "near", "big", "red"]


def _streams(num: int, refs: int, seed: int) -> list[list[str]]:
    """``refs`` reference streams of ``num`` sentences; the references of one sentence differ in words and length."""
    rng = random.Random(seed)
    return [[" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 11))) + " ." for _ in range(num)]
            for _ in range(refs)]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_multi_bleu_clips_by_the_largest_count_in_any_reference() -> None:
    # hyp "the the cat sat": ref 1 has one "the", ref 2 has two; "the the" is only in ref 2, "cat sat" in ref 1.
    #   1-grams: the(2, clipped to 2 by ref 2) cat sat -> 4/4
    #   2-grams: the-the (ref 2) the-cat (ref 2) cat-sat (ref 1) -> 3/3
    #   3-grams: the-the-cat (ref 2) | the-cat-sat -> 1/2
    #   4-grams: the-the-cat-sat -> 0/1, so multi-bleu.perl's score is 0; with ref 2 = "the the cat sat" it is 100
    assert multi_bleu(["the the cat sat"], [["the cat sat"], ["the the cat"]]) == 0.0
    assert multi_bleu(["the the cat sat"], [["the cat sat"], ["the the cat sat"]]) == pytest.approx(100.0)
    # one reference alone clips "the" to 1: 3/4, 2/3 (the-cat, cat-sat), 1/2 (the-cat-sat), 0/1
    assert multi_bleu(["the the cat sat"], ["the cat sat"]) == 0.0


def test_multi_bleu_brevity_penalty_uses_the_closest_reference_the_shorter_on_a_tie() -> None:
    hyp = ["a b c d e f"]  # c = 6; every n-gram is in the 10-token reference
    long, longer = "a b c d e f g h i j", "a b c d e f g h i j k l"
    # closest to 6 among 10 and 12: r = 10, BP = exp(1 - 10/6)
    assert multi_bleu(hyp, [[long], [longer]]) == pytest.approx(100.0 * math.exp(1 - 10 / 6))
    # 4 and 8 tie at distance 2 from 6: the shorter (4) wins, c > r, BP = 1; the 8-token reference holds every
    # n-gram of hyp, so the precisions are all 1 (the longer on a tie would give BP = exp(1 - 8/6))
    assert multi_bleu(hyp, [["a b c d"], ["a b c d e f g h"]]) == pytest.approx(100.0)
    # with the 8-token reference alone, r = 8 > c
    assert multi_bleu(hyp, ["a b c d e f g h"]) == pytest.approx(100.0 * math.exp(1 - 8 / 6))


@pytest.mark.parametrize("lowercase", [False, True])
def test_multi_bleu_equals_sacrebleu_with_four_references(lowercase: bool) -> None:
    streams = _streams(40, 4, seed=1)
    rng = random.Random(2)
    # each hypothesis takes words of two of its references, capitalised: matches come from several references
    hyps = []
    for i in range(40):
        first, second = rng.sample(range(4), 2)
        words = streams[first][i].split()[:4] + streams[second][i].split()[2:]
        hyps.append(" ".join(words).capitalize())
    expected = BLEU(tokenize="none", force=True, lowercase=lowercase).corpus_score(hyps, streams)
    assert all(precision > 0 for precision in expected.precisions)  # else multi-bleu.perl's 0 differs by design
    assert multi_bleu(hyps, streams, lowercase=lowercase) == pytest.approx(expected.score)


def test_each_sentence_matching_one_of_its_references_scores_100_against_all() -> None:
    streams = _streams(12, 4, seed=3)
    hyps = [streams[i % 4][i] for i in range(12)]  # sentence i is a copy of reference i % 4
    four = corpus_scores(hyps, streams, tokenized_bleu=True)
    assert float(four["bleu"]) == pytest.approx(100.0) and float(four["tok_bleu"]) == pytest.approx(100.0)
    assert float(four["chrf"]) == pytest.approx(100.0)
    assert "nrefs:4" in str(four["bleu_signature"]) and "nrefs:4" in str(four["chrf_signature"])
    for stream in streams:
        assert float(corpus_scores(hyps, stream)["bleu"]) < 60.0
    assert four == corpus_scores(hyps, streams[::-1], tokenized_bleu=True)  # the order of the references


def test_one_reference_stream_is_the_single_reference_score() -> None:
    (refs,) = _streams(15, 1, seed=4)
    hyps = [" ".join(line.split()[1:]) for line in refs]
    assert reference_streams(refs) == [refs] and reference_streams([refs]) == [refs]
    assert corpus_scores(hyps, [refs], tokenized_bleu=True) == corpus_scores(hyps, refs, tokenized_bleu=True)
    assert "nrefs:1" in str(corpus_scores(hyps, refs)["bleu_signature"])
    expected = CHRF().corpus_score(hyps, [refs]).score
    assert float(corpus_scores(hyps, [refs])["chrf"]) == pytest.approx(expected)


def test_a_reference_stream_of_another_length_is_named_by_its_number() -> None:
    streams = _streams(5, 4, seed=5)
    streams[2] = streams[2][:4]
    with pytest.raises(InputError, match="5 hypotheses but 4 references in reference 3 of 4"):
        corpus_scores(streams[0], streams)
    with pytest.raises(InputError, match="reference 3 of 4"):
        multi_bleu(streams[0], streams)


def test_score_files_reads_several_reference_files(tmp_path: Path) -> None:
    streams = _streams(8, 4, seed=6)
    hyps = [streams[(i + 1) % 4][i] for i in range(8)]
    hyp = _write(tmp_path / "hyp", hyps)
    refs = [_write(tmp_path / f"nist.en{k}", stream) for k, stream in enumerate(streams)]
    assert score_files(hyp, refs, lowercase=True) == corpus_scores(hyps, streams, lowercase=True)
    assert score_files(hyp, refs[0]) == score_files(hyp, [str(refs[0])]) == corpus_scores(hyps, streams[0])


def test_score_files_names_the_reference_file_with_another_line_count_or_missing(tmp_path: Path) -> None:
    streams = _streams(6, 4, seed=7)
    hyp = _write(tmp_path / "hyp", streams[0])
    refs = [_write(tmp_path / f"nist.en{k}", stream) for k, stream in enumerate(streams)]
    _write(refs[2], streams[2][:5])
    with pytest.raises(InputError, match=r"hyp has 6 lines but \S*nist\.en2 has 5"):
        score_files(hyp, refs)
    refs[2].unlink()
    with pytest.raises(InputError, match=r"nist\.en2: no such file"):
        score_files(hyp, refs)
    with pytest.raises(InputError, match="no reference file"):
        score_files(hyp, [])


def test_ordo_evaluate_takes_repeated_refs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    streams = _streams(10, 4, seed=8)
    hyps = [streams[(i + 2) % 4][i].upper() for i in range(10)]
    hyp = _write(tmp_path / "hyp", hyps)
    refs = [str(_write(tmp_path / f"ref{k}", stream)) for k, stream in enumerate(streams)]
    flags = [word for ref in refs for word in ("--ref", ref)]
    assert main(["evaluate", "--hyp", str(hyp), *flags, "--lowercase", "--tokenized-bleu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["hyp"]
    assert report == corpus_scores(hyps, streams, tokenized_bleu=True, lowercase=True)
    assert report["bleu"] == pytest.approx(100.0) and "nrefs:4|case:lc" in report["bleu_signature"]
    assert main(["evaluate", "--hyp", str(hyp), *flags]) == 0  # cased: the upper-cased output scores low
    out = capsys.readouterr().out
    assert "nrefs:4|case:mixed" in out and float(out.split("BLEU")[1].split()[0]) < 10.0


def test_ordo_evaluate_names_the_bad_reference_and_refuses_compare_with_several(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    streams = _streams(6, 4, seed=9)
    hyp = str(_write(tmp_path / "hyp", streams[0]))
    refs = [str(_write(tmp_path / f"ref{k}", stream)) for k, stream in enumerate(streams)]
    _write(Path(refs[3]), streams[3] + ["one line too many"])
    flags = [word for ref in refs for word in ("--ref", ref)]
    assert main(["evaluate", "--hyp", hyp, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ordo evaluate: error: ") and f"{refs[3]} has 7" in err and "ref0" not in err
    assert main(["evaluate", "--hyp", hyp, *flags[:6], "--compare", hyp]) == 2
    assert "3 references given: --compare and --ribes score against one --ref" in capsys.readouterr().err
    assert main(["evaluate", "--hyp", hyp, *flags[:4], "--ribes"]) == 2
