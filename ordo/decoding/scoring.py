"""Scores of given translations under a model (forced decoding): fairseq-generate's ``--score-reference``,
Marian's ``marian-scorer``, Sockeye's ``score``.

A (source x, target y) pair scores log P(y | x) = Σ_t log p(y_t | y_<t, x), natural log, over the target's pieces
and EOS: the ``log_prob`` that beam search gives the same pieces as a hypothesis (its ``score`` is this
divided by the length penalty). One teacher-forced pass per batch computes every position at once; the output
layer's log-softmax runs in float32 on chunks of rows, so no (tokens x vocabulary) logits of a whole batch are
held. An ensemble (:mod:`ordo.decoding.ensemble`) scores each token by the members' mean probability, the
distribution its search follows: log p(y_t) = logsumexp_k log p_k(y_t) - log K, one teacher-forced pass per member.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ordo.config import DecodeConfig
from ordo.data.batch import PAD_ID, Batch
from ordo.data.batching import collate, epoch_batches
from ordo.decoding.ensemble import Ensemble
from ordo.decoding.translator import decoding
from ordo.losses import CHUNK_ELEMENTS
from ordo.models.outputs import Seq2SeqOutput


@dataclass(frozen=True)
class PairScore:
    """One pair's log P(y | x) (natural log) and the target tokens it sums over (pieces + EOS)."""

    log_prob: float
    tokens: int

    @property
    def per_token(self) -> float:
        """The mean log-probability of the target's tokens: log P(y | x) / |y|."""
        return self.log_prob / self.tokens


def token_log_probs(output: Seq2SeqOutput, tgt_out: torch.Tensor) -> torch.Tensor:
    """log softmax(z_t)[y_t] of every non-pad target, in float32, row by row in order.

    Shape:
        output.hidden: (B, T, D); tgt_out: (B, T) target ids, PAD after each row's EOS -> (N,), N non-pad targets.
    """
    keep = tgt_out.ne(PAD_ID)  # (B, T)
    rows = output.hidden[keep]  # (N, D), row-major: the pairs' tokens in order
    targets = tgt_out[keep]  # (N,)
    vocab_size: int = output.project.out_features  # type: ignore[assignment]
    chunk = max(1, CHUNK_ELEMENTS // vocab_size)
    return torch.cat([
        F.log_softmax(output.project(rows[start:start + chunk]).float(), dim=-1)
        .gather(1, targets[start:start + chunk, None]).squeeze(1)
        for start in range(0, rows.size(0), chunk)
    ])


def row_sums(values: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """Each row's sum of ``values``, one per non-pad target of ``tgt_out`` in row-major order: (N,) -> (B,)."""
    row_of_token = tgt_out.ne(PAD_ID).nonzero()[:, 0]  # (N,)
    return torch.zeros(tgt_out.size(0), device=values.device).index_add_(0, row_of_token, values)


def target_log_probs(output: Seq2SeqOutput, tgt_out: torch.Tensor) -> torch.Tensor:
    """Σ_t log softmax(z_t)[y_t] of each row over its non-pad targets, in float32.

    Shape:
        output.hidden: (B, T, D); tgt_out: (B, T) target ids, PAD after each row's EOS -> (B,).
    """
    return row_sums(token_log_probs(output, tgt_out), tgt_out)


def batch_log_probs(model: nn.Module, batch: Batch) -> torch.Tensor:
    """log P(y | x) of each pair of ``batch`` (B,): one model's, or an :class:`Ensemble`'s, whose token
    probability is its members' mean (the rule of :meth:`Ensemble.decode_step`).

    Raises:
        ValueError: when ``batch`` has no targets.
    """
    tgt_out = batch.tgt_out
    if tgt_out is None:
        raise ValueError("scoring needs a batch with targets")
    if isinstance(model, Ensemble):
        members = torch.stack([token_log_probs(member(batch), tgt_out) for member in model.members])  # (K, N)
        return row_sums(torch.logsumexp(members, dim=0) - math.log(len(model.members)), tgt_out)
    return target_log_probs(model(batch), tgt_out)


def score_rows(
    model: nn.Module,
    src_rows: Sequence[np.ndarray],
    tgt_rows: Sequence[np.ndarray],
    decode: DecodeConfig,
    device: torch.device | str = "cpu",
    field_rows: Mapping[str, Sequence[np.ndarray]] | None = None,
    progress: Callable[[int], object] | None = None,
) -> list[PairScore]:
    """log P(y | x) of every (source row, target row) pair (token ids without EOS), in input order.

    Pairs are sorted by length and cut into batches of ``decode.max_tokens`` tokens (the longer side counts); the
    model runs under :func:`ordo.decoding.translator.decoding`'s settings (``decode.amp``, ``decode.cpu_gemm``).
    An empty side is scored as it is: the source as EOS alone, the target as EOS. ``progress`` is called with
    the number of pairs done after each batch.
    """
    src_lengths = np.array([len(r) for r in src_rows], dtype=np.int64)
    tgt_lengths = np.array([len(r) for r in tgt_rows], dtype=np.int64)
    scores: dict[int, PairScore] = {}
    with decoding(model, decode, device):
        for indices in epoch_batches(src_lengths, tgt_lengths, decode.max_tokens, 0, 0, shuffle=False):
            fields = {k: [rows[i] for i in indices] for k, rows in (field_rows or {}).items()}
            batch = collate(indices, [src_rows[i] for i in indices], [tgt_rows[i] for i in indices], fields)
            batch = batch.to(device)
            sums = batch_log_probs(model, batch).tolist()
            for index, log_prob in zip(indices.tolist(), sums):
                scores[index] = PairScore(log_prob, int(tgt_lengths[index]) + 1)
            if progress is not None:
                progress(len(indices))
    return [scores[index] for index in range(len(src_rows))]
