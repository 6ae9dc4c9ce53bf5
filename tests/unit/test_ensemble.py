"""Ensemble decoding: the mean of the members' probabilities at every step, each member's state moved with the
hypotheses (small random-weight Transformer and RNN models)."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
import torch.nn.functional as F

from ordo.build import build_model
from ordo.config import load_config
from ordo.data.batch import BOS_ID, EOS_ID, PAD_ID, Batch
from ordo.decoding.ensemble import Ensemble
from ordo.decoding.quantize import quantize_int8
from ordo.decoding.search import Hypothesis, beam_search, greedy_search

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

VOCAB = 12


def random_model(preset: str, seed: int) -> torch.nn.Module:
    """A model of ``preset`` with random weights (seed ``seed``), in eval mode."""
    cfg = load_config(None, [f"model.preset={preset}", "model.dropout=0"]).model
    torch.manual_seed(seed)
    return build_model(cfg, VOCAB, VOCAB).model.eval()


def make_batch(src_lengths: list[int], seed: int = 0) -> Batch:
    """Random sources of the given lengths (EOS included), right-padded."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.full((len(src_lengths), max(src_lengths)), PAD_ID, dtype=torch.long)  # (B, S)
    for row, length in enumerate(src_lengths):
        src[row, : length - 1] = torch.randint(4, VOCAB, (length - 1,), generator=generator)
        src[row, length - 1] = EOS_ID
    return Batch(src, torch.tensor(src_lengths), torch.arange(len(src_lengths)))


def row_of(batch: Batch, row: int) -> Batch:
    """Sentence ``row`` of ``batch`` alone, without padding."""
    length = int(batch.src_lengths[row])
    return Batch(batch.src_tokens[row : row + 1, :length], batch.src_lengths[row : row + 1],
                 batch.ids[row : row + 1])


def assert_same(actual: list[list[Hypothesis]], wanted: list[list[Hypothesis]]) -> None:
    """Same tokens, and log-probabilities and scores equal up to float rounding, sentence by sentence."""
    assert [[h.tokens for h in hs] for hs in actual] == [[h.tokens for h in hs] for hs in wanted]
    for got, want in zip(actual, wanted):
        assert [h.log_prob for h in got] == pytest.approx([h.log_prob for h in want], abs=1e-4)
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-4)


SEARCH = {"max_len_a": 1.0, "max_len_b": 3}  # short limits: some sentences end at EOS, others at their maximum


@pytest.mark.parametrize("preset", ["tiny", "rnn-tiny"])
def test_a_model_ensembled_with_itself_searches_as_the_model(preset):
    """Ensemble(m, m) == m at beam 5 and greedy: sentences end at different steps, so rows are reordered and
    dropped, and any member cache out of step with the hypotheses would change the result."""
    model = random_model(preset, seed=1)
    ensemble = Ensemble([model, model]).eval()
    batch = make_batch([5, 2, 7, 4, 3], seed=1)
    single = beam_search(model, batch, beam_size=5, nbest=5, **SEARCH)
    assert len({max(len(h.tokens) for h in hs) for hs in single}) > 1  # sentences leave the beam at different steps
    assert_same(beam_search(ensemble, batch, beam_size=5, nbest=5, **SEARCH), single)
    assert_same(greedy_search(ensemble, batch, **SEARCH), greedy_search(model, batch, **SEARCH))


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_members_in_int8_or_under_bf16_autocast_search_as_one_such_model(precision):
    """``--int8`` quantizes each member on its own and ``--amp bf16`` runs every member under autocast: an
    ensemble of two int8 copies of a model, or of the model twice under bf16, finds what that one model finds."""
    model = random_model("tiny", seed=2)
    batch = make_batch([6, 3, 8, 4], seed=2)
    if precision == "int8":
        single = quantize_int8(model)
        ensemble = Ensemble([quantize_int8(model), quantize_int8(model)]).eval()
        context = contextlib.nullcontext()
    else:
        single, ensemble = model, Ensemble([model, model]).eval()
        context = torch.autocast("cpu", dtype=torch.bfloat16)
    with context:
        wanted = beam_search(single, batch, beam_size=5, nbest=5, **SEARCH)
        assert_same(beam_search(ensemble, batch, beam_size=5, nbest=5, **SEARCH), wanted)
    assert wanted != beam_search(model, batch, beam_size=5, nbest=5, **SEARCH)  # the precision changed something


def test_a_step_is_the_log_of_the_members_mean_probability():
    first, second = random_model("tiny", seed=0), random_model("rnn-tiny", seed=1)
    ensemble = Ensemble([first, second]).eval()
    batch = make_batch([5, 3], seed=2)
    prev = torch.tensor([BOS_ID, BOS_ID])
    with torch.inference_mode():
        lprobs = ensemble.decode_step(prev, ensemble.init_state(ensemble.encode(batch)))  # (2, V)
        members = [F.log_softmax(m.decode_step(prev, m.init_state(m.encode(batch))), dim=-1) for m in (first, second)]
    mean = (members[0].exp() + members[1].exp()) / 2
    torch.testing.assert_close(lprobs, mean.log(), atol=1e-5, rtol=0)
    torch.testing.assert_close(lprobs, torch.logsumexp(torch.stack(members), 0) - math.log(2), atol=1e-6, rtol=0)
    torch.testing.assert_close(F.log_softmax(lprobs, dim=-1), lprobs, atol=1e-6, rtol=0)  # search's softmax: a no-op


def test_beam_search_over_two_models_is_batch_independent():
    ensemble = Ensemble([random_model("tiny", seed=0), random_model("rnn-tiny", seed=1)]).eval()
    batch = make_batch([5, 2, 7, 4], seed=3)
    together = beam_search(ensemble, batch, beam_size=5, nbest=5, **SEARCH)
    for row in range(4):
        assert_same([together[row]], beam_search(ensemble, row_of(batch, row), beam_size=5, nbest=5, **SEARCH))


def test_the_output_limit_is_the_smallest_of_the_members():
    transformer, rnn = random_model("tiny", seed=0), random_model("rnn-tiny", seed=1)
    assert Ensemble([rnn, transformer]).max_output_tokens == transformer.max_output_tokens
    assert Ensemble([rnn, rnn]).max_output_tokens is None
