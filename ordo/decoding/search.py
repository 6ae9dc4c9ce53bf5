"""Greedy and beam search over any model that follows the ``Seq2SeqModel`` protocol.

Search only calls ``encode``, ``init_state`` and ``decode_step`` and moves the rows of the
:class:`~ordo.models.outputs.DecoderState` with ``reorder``; whatever a model or a method keeps between
steps lives in that state, so nothing here knows about a particular model or method (STYLE guideline 5).

Conventions shared by both searches:

- Decoding starts from ``BOS_ID``; ``PAD_ID`` and ``BOS_ID`` are never produced.
- The maximum output length of a sentence is ``floor(max_len_a * src_len + max_len_b)`` tokens, not
  counting EOS (``src_len`` is ``batch.src_lengths``, which counts the source EOS). A hypothesis that
  reaches it gets EOS forced at the next step, as in fairseq's ``SequenceGenerator``.
- A hypothesis's ``log_prob`` is the sum of the model's token log-probabilities, EOS included, and its
  ``score`` is ``log_prob / (len(tokens) + 1) ** length_penalty`` (fairseq's length normalisation; the
  length counts EOS).
- Rows of sentences that are done are dropped from the state, so later steps run on fewer rows.

Beam search follows fairseq: each step takes the ``2 * beam_size`` best (hypothesis, token) candidates by
cumulative log-probability; EOS candidates among the first ``beam_size`` become finished hypotheses, and
the first ``beam_size`` non-EOS candidates stay live. A sentence is done as soon as it has ``beam_size``
finished hypotheses (fairseq's stopping rule, not the exact "no live beam can still win" bound, which
with length normalisation would almost always run to the maximum length), or when it reaches its
maximum length. With ``beam_size=1`` this is exactly greedy search.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ordo.data.batch import BOS_ID, EOS_ID, PAD_ID, Batch
from ordo.models.outputs import DecoderState, Seq2SeqModel


@dataclass
class Hypothesis:
    """One finished translation.

    Attributes:
        tokens: target token ids, without BOS and without the final EOS.
        score: length-normalised score used for ranking, ``log_prob / (len(tokens) + 1) ** length_penalty``.
        log_prob: sum of the token log-probabilities, EOS included.
    """

    tokens: list[int]
    score: float
    log_prob: float


def max_output_lengths(
    src_lengths: torch.Tensor, max_len_a: float, max_len_b: int, limit: int | None = None
) -> torch.Tensor:
    """Maximum number of output tokens (EOS not counted) of each sentence.

    Args:
        src_lengths: (B,) source lengths, EOS included.
        max_len_a: factor on the source length.
        max_len_b: tokens added to it.
        limit: the most the model can produce (``Seq2SeqModel.max_output_tokens``), None for no limit.

    Returns:
        (B,) long, ``floor(max_len_a * src_len + max_len_b)``, at least 0 and at most ``limit``.
    """
    return torch.floor(src_lengths.double() * max_len_a + max_len_b).long().clamp(min=0, max=limit)


def greedy_search(
    model: Seq2SeqModel,
    batch: Batch,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    length_penalty: float = 1.0,
    min_len: int = 0,
) -> list[list[Hypothesis]]:
    """The most probable token at every step, for all sentences of ``batch`` at once.

    Args:
        model: any model following the ``Seq2SeqModel`` protocol (the caller sets eval mode).
        batch: source side of the sentences to translate.
        max_len_a: maximum output length factor, see :func:`max_output_lengths`.
        max_len_b: maximum output length offset.
        length_penalty: exponent of the length in ``Hypothesis.score`` (it does not affect the output;
            the default matches :func:`beam_search`, so beam size 1 gives the same scores).
        min_len: EOS is not allowed before this many output tokens (unless the maximum is reached).

    Returns:
        One list per sentence, in batch order, holding its single hypothesis.
    """
    with torch.inference_mode():
        state = model.init_state(model.encode(batch))
        num_sentences = batch.src_tokens.size(0)
        device = batch.src_tokens.device
        max_lens = max_output_lengths(batch.src_lengths, max_len_a, max_len_b, model.max_output_tokens).to(device)
        results: list[list[Hypothesis]] = [[] for _ in range(num_sentences)]
        sentences = torch.arange(num_sentences, device=device)  # (A,) batch index of each row
        tokens = torch.empty(num_sentences, 0, dtype=torch.long, device=device)  # (A, t)
        log_probs = torch.zeros(num_sentences, device=device)  # (A,)
        for step in range(int(max_lens.max()) + 1):
            forced = max_lens[sentences].le(step)  # (A,)
            lprobs = _next_log_probs(model, _last_tokens(tokens), state, forced, step < min_len)  # (A, V)
            best_lprobs, best = lprobs.max(dim=1)  # (A,), (A,)
            log_probs = log_probs + best_lprobs
            ended = best.eq(EOS_ID) | forced  # (A,)
            _collect_ended(ended, sentences, tokens, log_probs, length_penalty, results)
            keep = (~ended).nonzero().squeeze(1)  # (A',)
            if keep.numel() == 0:
                break
            if keep.numel() < sentences.numel():
                state.reorder(keep)
            sentences, log_probs = sentences[keep], log_probs[keep]
            tokens = torch.cat([tokens[keep], best[keep].unsqueeze(1)], dim=1)  # (A', t + 1)
    return results


def _collect_ended(
    ended: torch.Tensor,
    sentences: torch.Tensor,
    tokens: torch.Tensor,
    log_probs: torch.Tensor,
    length_penalty: float,
    results: list[list[Hypothesis]],
) -> None:
    """Store the greedy hypotheses of the rows that produced EOS this step.

    Args:
        ended: (A,) bool, rows that ended.
        sentences: (A,) batch index of each row.
        tokens: (A, t) tokens before this step's EOS.
        log_probs: (A,) log-probabilities, EOS included.
        length_penalty: exponent of the length in the score.
        results: per-sentence hypothesis lists, filled in place.
    """
    rows = ended.nonzero().squeeze(1)  # (E,)
    for sentence, prefix, log_prob in zip(
        sentences[rows].tolist(), tokens[rows].tolist(), log_probs[rows].tolist()
    ):
        results[sentence].append(_hypothesis(prefix, log_prob, length_penalty))


@dataclass
class _Beams:
    """The live hypotheses of the active sentences, ``beam_size`` consecutive rows per sentence.

    Shape:
        sentences: (A,) batch index of each active sentence; tokens: (A*K, t) tokens so far, without
        BOS; scores: (A*K,) float32 cumulative log-probabilities.
    """

    sentences: torch.Tensor
    tokens: torch.Tensor
    scores: torch.Tensor

    @classmethod
    def start(cls, num_sentences: int, beam_size: int, device: torch.device) -> _Beams:
        """``beam_size`` empty hypotheses per sentence, all but the first at -inf.

        Step 0 thus expands a single hypothesis per sentence and the beam holds no duplicates.
        """
        scores = torch.full((num_sentences, beam_size), float("-inf"), device=device)  # (B, K)
        scores[:, 0] = 0.0
        return cls(
            sentences=torch.arange(num_sentences, device=device),
            tokens=torch.empty(num_sentences * beam_size, 0, dtype=torch.long, device=device),
            scores=scores.view(-1),
        )


@dataclass
class _Candidates:
    """The best expansions of each active sentence, by cumulative log-probability, best first.

    Shape:
        scores: (A, C) cumulative log-probabilities; rows: (A, C) row of the expanded hypothesis in the
        current (A*K) layout; tokens: (A, C) the token appended.
    """

    scores: torch.Tensor
    rows: torch.Tensor
    tokens: torch.Tensor


def beam_search(
    model: Seq2SeqModel,
    batch: Batch,
    beam_size: int = 5,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    length_penalty: float = 1.0,
    nbest: int = 1,
    min_len: int = 0,
) -> list[list[Hypothesis]]:
    """Batched beam search: all sentences of ``batch`` at once, ``beam_size`` rows each.

    Args:
        model: any model following the ``Seq2SeqModel`` protocol (the caller sets eval mode).
        batch: source side of the sentences to translate.
        beam_size: live hypotheses per sentence (K).
        max_len_a: maximum output length factor, see :func:`max_output_lengths`.
        max_len_b: maximum output length offset.
        length_penalty: exponent of the length in the score; 0 ranks by log-probability alone, larger
            values favour longer hypotheses.
        nbest: hypotheses returned per sentence, at most ``beam_size``.
        min_len: EOS is not allowed before this many output tokens (unless the maximum is reached).

    Returns:
        One list per sentence, in batch order, of at most ``nbest`` distinct hypotheses, best score first.

    Raises:
        ValueError: if ``beam_size`` < 1 or ``nbest`` is not in [1, beam_size].
    """
    if beam_size < 1 or not 1 <= nbest <= beam_size:
        raise ValueError(f"need beam_size >= 1 and 1 <= nbest <= beam_size, got {beam_size}, {nbest}")
    with torch.inference_mode():
        state = model.init_state(model.encode(batch))
        num_sentences = batch.src_tokens.size(0)
        device = batch.src_tokens.device
        state.repeat_rows(beam_size)  # (B*K) rows
        max_lens = max_output_lengths(batch.src_lengths, max_len_a, max_len_b, model.max_output_tokens).to(device)
        num_finished = torch.zeros(num_sentences, dtype=torch.long, device=device)  # (B,)
        finished: list[list[Hypothesis]] = [[] for _ in range(num_sentences)]
        beams = _Beams.start(num_sentences, beam_size, device)
        for step in range(int(max_lens.max()) + 1):
            forced = max_lens[beams.sentences].le(step)  # (A,)
            lprobs = _next_log_probs(
                model, _last_tokens(beams.tokens), state, forced.repeat_interleave(beam_size), step < min_len
            )  # (A*K, V)
            candidates = _top_candidates(beams.scores, lprobs, beam_size)
            _collect_finished(candidates, beams, beam_size, length_penalty, finished, num_finished)
            done = num_finished[beams.sentences].ge(beam_size) | forced  # (A,)
            keep = (~done).nonzero().squeeze(1)  # (A',)
            if keep.numel() == 0:
                break
            beams = _advance(candidates, beams, keep, beam_size, state)
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:nbest] for hyps in finished]


def _top_candidates(scores: torch.Tensor, lprobs: torch.Tensor, beam_size: int) -> _Candidates:
    """The ``2 * beam_size`` best one-token expansions of each sentence's beam.

    Twice the beam size guarantees ``beam_size`` non-EOS candidates, since each row contributes at
    most one EOS. A hypothesis's expansions rank as its tokens' log-probabilities do, so the best
    ``2 * beam_size`` of a sentence lie among the best ``2 * beam_size`` tokens of each of its rows: only
    those are added to the hypothesis scores and compared, not all K * V.

    Args:
        scores: (A*K,) cumulative log-probabilities of the live hypotheses.
        lprobs: (A*K, V) next-token log-probabilities.
        beam_size: K.

    Returns:
        The candidates, best first.
    """
    num_active = scores.numel() // beam_size
    row_lprobs, row_tokens = lprobs.topk(min(2 * beam_size, lprobs.size(1)), dim=1)  # (A*K, C) each
    per_row = row_lprobs.size(1)
    total = (scores.unsqueeze(1) + row_lprobs).view(num_active, beam_size * per_row)  # (A, K*C)
    cand_scores, flat = total.topk(min(2 * beam_size, total.size(1)), dim=1)  # (A, 2K), (A, 2K)
    first_row = torch.arange(num_active, device=scores.device).unsqueeze(1) * beam_size  # (A, 1)
    rows = first_row + flat.div(per_row, rounding_mode="floor")  # (A, 2K)
    tokens = row_tokens.view(num_active, beam_size * per_row).gather(1, flat)  # (A, 2K)
    return _Candidates(scores=cand_scores, rows=rows, tokens=tokens)


def _collect_finished(
    candidates: _Candidates,
    beams: _Beams,
    beam_size: int,
    length_penalty: float,
    finished: list[list[Hypothesis]],
    num_finished: torch.Tensor,
) -> None:
    """Turn the EOS candidates among each sentence's first ``beam_size`` into finished hypotheses.

    Candidates at -inf (expansions of the empty beams of step 0) are skipped.

    Args:
        candidates: this step's candidates, (A, C) each.
        beams: the live hypotheses the candidates expand.
        beam_size: K.
        length_penalty: exponent of the length in the score.
        finished: per-sentence finished hypotheses, appended to in place.
        num_finished: (B,) number of finished hypotheses per sentence, updated in place.
    """
    top_scores = candidates.scores[:, :beam_size]  # (A, K)
    is_final = candidates.tokens[:, :beam_size].eq(EOS_ID) & top_scores.isfinite()  # (A, K)
    active, position = is_final.nonzero(as_tuple=True)  # (E,), (E,)
    if active.numel() == 0:
        return
    sentences = beams.sentences[active]  # (E,)
    num_finished.index_add_(0, sentences, torch.ones_like(sentences))
    prefixes = beams.tokens[candidates.rows[active, position]]  # (E, t)
    for sentence, prefix, log_prob in zip(
        sentences.tolist(), prefixes.tolist(), top_scores[active, position].tolist()
    ):
        finished[sentence].append(_hypothesis(prefix, log_prob, length_penalty))


def _select_live(candidates: _Candidates, beam_size: int) -> torch.Tensor:
    """Positions of the first ``beam_size`` non-EOS candidates of each sentence, best first.

    Args:
        candidates: this step's candidates, (A, C) each.
        beam_size: K.

    Returns:
        (A, K) long positions into the candidate dimension.
    """
    num_candidates = candidates.tokens.size(1)
    order = torch.arange(num_candidates, device=candidates.tokens.device)  # (C,)
    key = candidates.tokens.eq(EOS_ID).long() * num_candidates + order  # (A, C), EOS after the rest
    return key.topk(beam_size, dim=1, largest=False).indices  # (A, K), ascending


def _advance(
    candidates: _Candidates, beams: _Beams, keep: torch.Tensor, beam_size: int, state: DecoderState
) -> _Beams:
    """Keep the unfinished sentences and their live candidates, and move the state rows with them.

    Args:
        candidates: this step's candidates, (A, C) each.
        beams: the live hypotheses before this step.
        keep: (A',) indices of the active sentences that go on.
        beam_size: K.
        state: decoder state with A*K rows, reordered in place to A'*K rows.

    Returns:
        The live hypotheses after this step.
    """
    live = _select_live(candidates, beam_size)[keep]  # (A', K)
    rows = candidates.rows[keep].gather(1, live).view(-1)  # (A'*K,)
    new_tokens = candidates.tokens[keep].gather(1, live).view(-1, 1)  # (A'*K, 1)
    state.reorder(rows, same_sources=keep.numel() == beams.sentences.numel())  # no sentence left the beam
    return _Beams(
        sentences=beams.sentences[keep],
        tokens=torch.cat([beams.tokens[rows], new_tokens], dim=1),  # (A'*K, t + 1)
        scores=candidates.scores[keep].gather(1, live).view(-1),  # (A'*K,)
    )


def _last_tokens(tokens: torch.Tensor) -> torch.Tensor:
    """The previous token of each row: its last token, or BOS before the first step.

    Args:
        tokens: (R, t) tokens so far.

    Returns:
        (R,) long.
    """
    if tokens.size(1) == 0:
        return torch.full((tokens.size(0),), BOS_ID, dtype=torch.long, device=tokens.device)
    return tokens[:, -1]


def _next_log_probs(
    model: Seq2SeqModel, prev_tokens: torch.Tensor, state: DecoderState, forced: torch.Tensor, too_short: bool = False
) -> torch.Tensor:
    """Next-token log-probabilities in float32 with PAD and BOS masked, EOS forced where asked.

    Args:
        model: the model; its ``decode_step`` advances ``state``.
        prev_tokens: (R,) previous tokens.
        state: decoder state with R rows.
        forced: (R,) bool, rows that reached their maximum length: every token but EOS gets -inf there.
        too_short: the outputs are shorter than the minimum length: EOS gets -inf (unless forced).

    Returns:
        (R, V) float32 log-probabilities (the model's own values where not masked).
    """
    lprobs = F.log_softmax(model.decode_step(prev_tokens, state).float(), dim=-1)  # (R, V)
    lprobs[:, [PAD_ID, BOS_ID]] = float("-inf")
    if too_short:
        lprobs[:, EOS_ID] = lprobs[:, EOS_ID].masked_fill(~forced, float("-inf"))
    if not bool(forced.any()):
        return lprobs
    rows = forced.nonzero().squeeze(1)  # (F,)
    eos = lprobs[rows, EOS_ID]
    lprobs[rows] = float("-inf")
    lprobs[rows, EOS_ID] = eos
    return lprobs


def _hypothesis(tokens: list[int], log_prob: float, length_penalty: float) -> Hypothesis:
    """A finished hypothesis scored as fairseq does: log-prob / (tokens + EOS) ** length_penalty.

    Args:
        tokens: the tokens before EOS.
        log_prob: sum of the log-probabilities, EOS included.
        length_penalty: exponent of the length.

    Returns:
        The hypothesis.
    """
    length = len(tokens) + 1
    score = log_prob / math.pow(length, length_penalty)
    return Hypothesis(tokens=tokens, score=score, log_prob=log_prob)
