"""Alignment error rate (Och & Ney 2003, "A Systematic Comparison of Various Statistical Alignment Models").

With A the hypothesis links, S the sure and P ⊇ S the possible gold links, summed over the corpus::

    precision = |A ∩ P| / |A|,   recall = |A ∩ S| / |S|,   AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ordo.data.alignment.links import Link, SentenceLinks, read_links
from ordo.errors import InputError


@dataclass
class AERResult:
    """Corpus-level alignment quality; rates in [0, 1]."""

    aer: float
    precision: float
    recall: float
    sentences: int


def alignment_error_rate(hypotheses: Iterable[set[Link]], golds: Iterable[SentenceLinks]) -> AERResult:
    """AER, precision and recall of ``hypotheses`` against ``golds``, sentence by sentence.

    Raises:
        InputError: when the two sequences differ in length or the gold set has no sure link at all.
    """
    hyp_total = sure_total = hit_sure = hit_possible = sentences = 0
    hyp_list, gold_list = list(hypotheses), list(golds)
    if len(hyp_list) != len(gold_list):
        raise InputError(f"{len(hyp_list)} hypothesis alignments but {len(gold_list)} gold alignments")
    for hyp, gold in zip(hyp_list, gold_list):
        possible = gold.possible | gold.sure
        hyp_total += len(hyp)
        sure_total += len(gold.sure)
        hit_sure += len(hyp & gold.sure)
        hit_possible += len(hyp & possible)
        sentences += 1
    if sure_total == 0:
        raise InputError("the gold alignments have no sure links")
    aer = 1.0 - (hit_sure + hit_possible) / (hyp_total + sure_total)
    precision = hit_possible / hyp_total if hyp_total else 0.0
    return AERResult(aer, precision, hit_sure / sure_total, sentences)


def score_alignment_files(hyp_path: str | Path, gold_path: str | Path, gold_one_based: bool = True,
                          first: int | None = None) -> AERResult:
    """:func:`alignment_error_rate` of the 0-based Pharaoh links of ``hyp_path`` against the gold links of
    ``gold_path``, line by line: all lines, or the first ``first`` of each file.

    Raises:
        InputError: naming the files when their line counts differ (with ``first``: when either has fewer than
            ``first`` lines), a link is malformed, or the gold links scored have no sure link.
    """
    hyps = [links.sure for links in read_links(hyp_path)]
    golds = list(read_links(gold_path, one_based=gold_one_based))
    if first is not None:
        for path, lines in ((hyp_path, hyps), (gold_path, golds)):
            if len(lines) < first:
                raise InputError(f"{path} has {len(lines)} lines, fewer than the first {first} to score")
        hyps, golds = hyps[:first], golds[:first]
    elif len(hyps) != len(golds):
        raise InputError(f"{hyp_path} has {len(hyps)} lines but {gold_path} has {len(golds)}")
    try:
        return alignment_error_rate(hyps, golds)
    except InputError as err:
        raise InputError(f"{gold_path}: {err}") from None
