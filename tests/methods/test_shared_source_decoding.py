"""Beam search with the source side shared by a sentence's hypotheses (``DecoderState.shares_source``) gives
the same translations as a copy per hypothesis, for the baseline and the methods whose decoder reads it."""

from __future__ import annotations

import pytest
import torch
from model_helpers import tiny, toy_batch

from ordo.decoding.search import beam_search
from ordo.models.attention import CrossAttention
from ordo.models.outputs import DecoderState, EncoderOutput, Seq2SeqModel


class CopyPerHypothesis:
    """``model`` with the source side copied to every decoder row, as before sharing existed; it records the
    rows of the encoder output and of the state at each step."""

    def __init__(self, model: Seq2SeqModel, share: bool) -> None:
        self.model = model
        self.share = share
        self.max_output_tokens = model.max_output_tokens
        self.rows: list[tuple[int, int]] = []

    def encode(self, batch):  # type: ignore[no-untyped-def]
        return self.model.encode(batch)

    def init_state(self, encoder_out: EncoderOutput) -> DecoderState:
        state = self.model.init_state(encoder_out)
        state.shares_source = state.shares_source and self.share
        return state

    def decode_step(self, prev_tokens: torch.Tensor, state: DecoderState) -> torch.Tensor:
        self.rows.append((state.encoder.states.size(0), state.batch_size))
        return self.model.decode_step(prev_tokens, state)


@pytest.mark.parametrize("overrides", [
    (),
    ("model.methods.future_cost.model=2",),
    ("model.methods.reorder_emb.variant=decoder", "model.norm=post"),
])
def test_shared_source_translates_like_a_copy_per_hypothesis(overrides):
    model = tiny(*overrides).eval()
    batch = toy_batch(rows=4, src_len=7, tgt_len=2, short_row=2, short_len=3, seed=4)
    shared, copied = CopyPerHypothesis(model, share=True), CopyPerHypothesis(model, share=False)
    options = {"beam_size": 4, "nbest": 4, "max_len_a": 1.5, "max_len_b": 1}  # row 2 stops early
    for mine, theirs in zip(beam_search(shared, batch, **options), beam_search(copied, batch, **options)):
        assert [h.tokens for h in mine] == [h.tokens for h in theirs]
        assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-5)
    assert shared.rows[0] == (4, 16) and copied.rows[0] == (16, 16)
    assert all(rows * 4 == beams for rows, beams in shared.rows)
    assert shared.rows[-1][0] < 4  # sentences that finished left the state


def test_state_rows_follow_their_sentence():
    encoder = EncoderOutput(torch.arange(2.0).view(2, 1, 1), torch.zeros(2, 1, dtype=torch.bool))
    state = DecoderState(encoder, caches=[{"src_k": torch.tensor([[10.0], [11.0]]), "self_k": torch.tensor([[0.0], [1.0]])}],
                         shares_source=True)
    state.repeat_rows(3)
    assert state.batch_size == 6 and state.rows_per_source == 3
    assert state.caches[0]["src_k"].flatten().tolist() == [10.0, 11.0]
    assert state.caches[0]["self_k"].flatten().tolist() == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    state.reorder(torch.tensor([2, 0, 0, 1, 1, 1]), same_sources=True)
    assert state.caches[0]["src_k"].flatten().tolist() == [10.0, 11.0]
    state.reorder(torch.tensor([5, 3, 4]))  # sentence 0 is done
    assert state.encoder.states.flatten().tolist() == [1.0]
    assert state.caches[0]["src_k"].flatten().tolist() == [11.0]
    with pytest.raises(ValueError, match="one source sentence"):
        state.reorder(torch.tensor([0, 1, 3]))


def test_state_without_sharing_copies_the_source_side():
    encoder = EncoderOutput(torch.arange(2.0).view(2, 1, 1), torch.zeros(2, 1, dtype=torch.bool))
    state = DecoderState(encoder, caches=[{"src_k": torch.tensor([[10.0], [11.0]])}])
    state.repeat_rows(2)
    assert state.rows_per_source == 1 and state.batch_size == 4
    assert state.caches[0]["src_k"].flatten().tolist() == [10.0, 10.0, 11.0, 11.0]
    assert state.encoder.states.flatten().tolist() == [0.0, 0.0, 1.0, 1.0]


def test_cross_attention_groups_equal_a_copy_per_row_and_refuse_uneven_rows():
    torch.manual_seed(0)
    attention = CrossAttention(8, 2).eval()
    memory, queries = torch.randn(2, 4, 8), torch.randn(6, 2, 8)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])[:, None, None, :]
    grouped = attention(queries, memory, mask)
    copied = attention(queries, memory.repeat_interleave(3, 0), mask.repeat_interleave(3, 0))
    assert torch.allclose(grouped, copied, atol=1e-6)
    with pytest.raises(ValueError, match="groups"):
        attention(queries[:5], memory, mask)
