"""Translating many sentences: length-sorted batches through greedy or beam search, back in input order."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from ordo.config import DecodeConfig
from ordo.data.batch import Batch
from ordo.data.batching import collate, epoch_batches
from ordo.decoding.quantize import is_int8
from ordo.decoding.search import Hypothesis, beam_search, greedy_search
from ordo.errors import ConfigError
from ordo.gemm import cpu_gemm
from ordo.models.outputs import Seq2SeqModel
from ordo.precision import amp_dtype, autocast


def search_batch(model: Seq2SeqModel, batch: Batch, decode: DecodeConfig) -> list[list[Hypothesis]]:
    """Greedy search when ``decode.beam_size`` is 1, else beam search, for one batch."""
    if decode.beam_size <= 1:
        return greedy_search(model, batch, decode.max_len_a, decode.max_len_b, decode.length_penalty, decode.min_len)
    return beam_search(
        model, batch, decode.beam_size, decode.max_len_a, decode.max_len_b, decode.length_penalty, decode.nbest,
        decode.min_len,
    )


@contextlib.contextmanager
def decoding(model: nn.Module, decode: DecodeConfig, device: torch.device | str) -> Iterator[None]:
    """``model`` in eval mode under ``torch.inference_mode``, autocast to ``decode.amp``'s dtype on ``device`` (the
    scores stay in float32), and ``decode.cpu_gemm``'s backend for float32 linear layers on a CPU (``auto`` timing
    both per product shape, :mod:`ordo.gemm`).

    Raises:
        ConfigError: for autocast over an int8 model (it runs in float32).
    """
    model.eval()
    dtype = amp_dtype(decode.amp, torch.device(device))
    if dtype is not None and is_int8(model):
        raise ConfigError(f"decode.amp {decode.amp}: an int8 model translates in float32 (drop --amp or --int8)")
    with torch.inference_mode(), autocast(dtype, torch.device(device)), cpu_gemm(decode.cpu_gemm, timed=True):
        yield


def translate_rows(
    model: nn.Module,
    src_rows: Sequence[np.ndarray],
    decode: DecodeConfig,
    device: torch.device | str = "cpu",
    field_rows: Mapping[str, Sequence[np.ndarray]] | None = None,
    progress: Callable[[int], object] | None = None,
) -> list[list[Hypothesis]]:
    """Hypotheses for each source row (token ids without EOS), in input order.

    Rows are sorted by length and cut into batches of ``decode.max_tokens`` source tokens so that little
    padding is computed; the model runs under :func:`decoding`'s settings. An empty row (a blank
    line) gets one empty hypothesis of score 0 without running the model. ``progress`` is called with the
    number of rows done after each batch.
    """
    results: list[list[Hypothesis]] = [[Hypothesis([], 0.0, 0.0)] for _ in src_rows]
    lengths = np.array([len(r) for r in src_rows], dtype=np.int64)
    filled = np.flatnonzero(lengths)
    if progress is not None and len(filled) < len(src_rows):
        progress(len(src_rows) - len(filled))
    if not len(filled):
        return results
    with decoding(model, decode, device):
        for positions in epoch_batches(lengths[filled], None, decode.max_tokens, seed=0, epoch=0, shuffle=False):
            indices = filled[positions]
            fields = {k: [rows[i] for i in indices] for k, rows in (field_rows or {}).items()}
            batch = collate(indices, [src_rows[i] for i in indices], field_rows=fields).to(device)
            for index, hyps in zip(indices.tolist(), search_batch(model, batch, decode)):  # type: ignore[arg-type]
                results[index] = hyps
            if progress is not None:
                progress(len(indices))
    return results
