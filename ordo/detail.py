"""What a translation shows about word order, sentence by sentence: the attention of the model's own output
over its input, word links read off it, the source re-ordered as the translation uses it, Kendall's τ of the
links, and for ExGRE/ReFSR runs the encoder's predicted target-order positions (paper 000, b^N).

The attention comes from a teacher-forced pass over each best hypothesis
(:func:`ordo.decoding.attention.forced_attention`). Units: a side whose text has ASCII spaces and whose pieces
carry SentencePiece's word marks is split into words (a word's pieces pooled, as ``ordo align --model``
does); any other side (Chinese or Japanese text without spaces, a token vocabulary) counts each piece as a
unit of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import torch
from torch import nn

from ordo.data.alignment.links import Link
from ordo.data.alignment.reorder_field import WORD_START, pieces_per_word
from ordo.data.alignment.target_order import reorder_words, target_order
from ordo.data.batching import collate, epoch_batches
from ordo.decoding.attention import forced_attention, hard_links, pool_to_words
from ordo.evaluation.order import alignment_tau, ribes_tokens, sentence_ribes
from ordo.methods.exgre import PREDICTED_NAME


@dataclass
class Candidate:
    """One entry of an n-best list: the detokenized text and its length-normalised score."""

    text: str
    score: float


@dataclass
class ForcedPass:
    """What a teacher-forced pass over one (source, translation) pair shows.

    Shape:
        attention: (target pieces, source pieces), EOS row and column left out; None when the model shows
        none. predicted_positions: (source pieces,) ExGRE's b^N in [0, J]; None for other models.
    """

    attention: np.ndarray | None = None
    predicted_positions: np.ndarray | None = None


@dataclass
class TranslationDetail:
    """One sentence's translation with the word-order data ``ordo serve``'s page draws.

    Attributes:
        source: the input sentence; translation: its best translation; score: that hypothesis's score.
        nbest: every hypothesis search kept, best first.
        source_tokens, target_tokens: the pieces the model read and wrote (EOS not included).
        attention: (len(target_tokens), len(source_tokens)) attention weights, or None when not asked for or
            when the model shows none.
        source_units, target_units: the words (or pieces, see the module docstring) links index.
        links: (source unit, target unit) pairs, 0-based: each target unit to its most attended source unit.
        tau: Kendall's τ of the links (:func:`ordo.evaluation.order.alignment_tau`), None without links.
        source_in_target_order: the source units in the order the translation uses them
            (:func:`ordo.data.alignment.target_order.target_order`).
        predicted_positions: ExGRE/ReFSR's predicted target-order position of every source token, else None.
        ribes: sentence RIBES against a reference, when one was given.
    """

    source: str
    translation: str
    score: float
    nbest: list[Candidate]
    source_tokens: list[str]
    target_tokens: list[str]
    attention: np.ndarray | None = None
    source_units: list[str] = field(default_factory=list)
    target_units: list[str] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    tau: float | None = None
    source_in_target_order: list[str] = field(default_factory=list)
    predicted_positions: list[float] | None = None
    ribes: float | None = None


def units(text: str, pieces: Sequence[str]) -> tuple[list[str], list[int]]:
    """The link units of a side: ``(texts, pieces per unit)``; words when ``text`` has spaces and ``pieces``
    word marks, otherwise one unit per piece."""
    if " " in text.strip() and any(piece.startswith(WORD_START) for piece in pieces):
        counts = pieces_per_word(pieces)
    else:
        counts = [1] * len(pieces)
    edges = np.cumsum([0, *counts])
    texts = ["".join(pieces[a:b]).replace(WORD_START, "") for a, b in pairwise(edges)]
    return texts, counts


@torch.inference_mode()
def forced_passes(
    model: nn.Module,
    src_rows: Sequence[np.ndarray],
    tgt_rows: Sequence[np.ndarray],
    device: torch.device,
    field_rows: Mapping[str, Sequence[np.ndarray]] | None = None,
    max_tokens: int = 4000,
) -> list[ForcedPass]:
    """Teacher-forced passes over (source, target) token rows, in length-sorted batches; pairs with an empty
    side get an empty :class:`ForcedPass`."""
    found = [ForcedPass() for _ in src_rows]
    src_lengths = np.array([len(r) for r in src_rows], dtype=np.int64)
    tgt_lengths = np.array([len(r) for r in tgt_rows], dtype=np.int64)
    filled = np.flatnonzero((src_lengths > 0) & (tgt_lengths > 0))
    if not len(filled):
        return found
    model.eval()
    for positions in epoch_batches(src_lengths[filled], tgt_lengths[filled], max_tokens, 0, 0, shuffle=False):
        indices = filled[positions]
        fields = {k: [rows[i] for i in indices] for k, rows in (field_rows or {}).items()}
        batch = collate(indices, [src_rows[i] for i in indices], [tgt_rows[i] for i in indices], fields).to(device)
        attention, output = forced_attention(model, batch)
        predicted = output.extras.get(PREDICTED_NAME)
        for row, index in enumerate(indices.tolist()):
            src_len, tgt_len = int(src_lengths[index]), int(tgt_lengths[index])
            found[index] = ForcedPass(
                None if attention is None else attention[row, :tgt_len, :src_len].cpu().numpy(),
                None if predicted is None else predicted[row, :src_len].float().cpu().numpy(),
            )
    return found


def describe(
    source: str, translation: str, nbest: list[Candidate], source_tokens: list[str], target_tokens: list[str],
    forced: ForcedPass, reference: str | None = None,
) -> TranslationDetail:
    """A :class:`TranslationDetail` from a sentence's translation and its teacher-forced pass."""
    detail = TranslationDetail(source, translation, nbest[0].score, nbest, source_tokens, target_tokens,
                               forced.attention)
    if forced.predicted_positions is not None:
        detail.predicted_positions = [float(p) for p in forced.predicted_positions]
    if reference is not None:
        detail.ribes = text_ribes(translation, reference)
    if forced.attention is None:
        return detail
    detail.source_units, src_counts = units(source, source_tokens)
    detail.target_units, tgt_counts = units(translation, target_tokens)
    detail.links = sorted(hard_links(pool_to_words(forced.attention, src_counts, tgt_counts)))
    detail.tau = alignment_tau(detail.links)
    order = target_order(len(detail.source_units), detail.links)
    detail.source_in_target_order = reorder_words(detail.source_units, order)
    return detail


def text_ribes(hypothesis: str, reference: str) -> float:
    """Sentence RIBES of a detokenized hypothesis against a reference, both split by sacreBLEU's 13a tokenizer
    (:func:`ordo.evaluation.order.ribes_tokens`)."""
    hyp, ref = ribes_tokens([hypothesis, reference], tokenized=False)
    return sentence_ribes(ref.split(), hyp.split())
