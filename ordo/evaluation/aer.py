"""Alignment error rate (Och & Ney 2003, "A Systematic Comparison of Various Statistical Alignment Models").

With A the hypothesis links, S the sure and P ⊇ S the possible gold links, summed over the corpus::

    precision = |A ∩ P| / |A|,   recall = |A ∩ S| / |S|,   AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ordo.data.alignment.links import Link, SentenceLinks
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
