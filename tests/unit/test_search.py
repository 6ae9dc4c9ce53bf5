"""Greedy and beam search: a stub model with scripted probabilities (expected results computed by hand
from the script, as in fairseq's test_sequence_generator) and a small random-weight GRU model."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from ordo.build import build_model
from ordo.config import load_config
from ordo.data.batch import BOS_ID, EOS_ID, PAD_ID, Batch
from ordo.decoding.search import Hypothesis, _top_candidates, beam_search, greedy_search, max_output_lengths
from ordo.models.outputs import DecoderState, EncoderOutput, Seq2SeqOutput

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/unit/conftest.py

A, B = 4, 5  # the two content tokens of the scripted model
STUB_VOCAB = 6  # PAD, UNK, BOS, EOS, A, B

Script = dict[tuple[int, int], dict[int, float]]  # (step, previous token) -> next-token probabilities

# Greedy's path: A (0.6), A (0.5), EOS (0.9).
ARGMAX_PATH: Script = {
    (0, BOS_ID): {A: 0.6, B: 0.4},
    (1, A): {EOS_ID: 0.3, A: 0.5, B: 0.2},
    (2, A): {EOS_ID: 0.9, B: 0.1},
}
# The best first token (A, 0.6) leads to the worse total: [A] has 0.6 * 0.4 = 0.24, [B] has 0.4 * 0.9 = 0.36.
GARDEN_PATH: Script = {
    (0, BOS_ID): {A: 0.6, B: 0.4},
    (1, A): {EOS_ID: 0.4, A: 0.35, B: 0.25},
    (1, B): {EOS_ID: 0.9, A: 0.06, B: 0.04},
}
# Beam 2 finishes [A] (0.55 * 0.55) at step 1 and [B, A, A] (0.45 * 0.9 * 0.9 * 0.5) at step 3; the short
# one has the higher probability, the long one the higher probability per token.
SHORT_VS_LONG: Script = {
    (0, BOS_ID): {A: 0.55, B: 0.45},
    (1, A): {EOS_ID: 0.55, A: 0.25, B: 0.2},
    (1, B): {A: 0.9, EOS_ID: 0.05, B: 0.05},
    (2, A): {A: 0.9, EOS_ID: 0.06, B: 0.04},
    (3, A): {EOS_ID: 0.5, A: 0.3, B: 0.2},
}
NEVER_ENDS: Script = {}  # every step uses the default below
MOSTLY_A = {A: 0.8, B: 0.15, EOS_ID: 0.05}
SPECIALS_LIKELY = {PAD_ID: 0.3, BOS_ID: 0.25, A: 0.2, B: 0.15, EOS_ID: 0.1}


class ScriptedModel:
    """A ``Seq2SeqModel`` whose next-token probabilities come from a script per sentence.

    The sentence id (``batch.ids``) and the tokens fed so far live in ``state.fields``, so a search that
    lets a field drift from its hypothesis reads the wrong script or fails the history check.
    """

    max_output_tokens: int | None = None

    def __init__(self, scripts: dict[int, Script], default: dict[int, float]) -> None:
        self.scripts = scripts
        self.default = default
        self.rows_per_step: list[int] = []

    def forward(self, batch: Batch) -> Seq2SeqOutput:
        raise NotImplementedError("search never calls forward")

    def encode(self, batch: Batch) -> EncoderOutput:
        states = torch.zeros(*batch.src_tokens.shape, 1)  # (B, S, 1)
        return EncoderOutput(states, batch.src_pad_mask, extras={"sentence": batch.ids})

    def init_state(self, encoder_out: EncoderOutput) -> DecoderState:
        sentence = encoder_out.extras["sentence"]  # (B,)
        history = torch.empty(sentence.size(0), 0, dtype=torch.long)  # (B, 0)
        return DecoderState(encoder_out, fields={"sentence": sentence, "history": history})

    def decode_step(self, prev_tokens: torch.Tensor, state: DecoderState) -> torch.Tensor:
        history = torch.cat([state.fields["history"], prev_tokens.unsqueeze(1)], dim=1)  # (R, t + 1)
        assert history[:, 0].eq(BOS_ID).all() and history.size(1) == state.step + 1
        state.fields["history"] = history
        self.rows_per_step.append(state.batch_size)
        rows = []
        for sentence, prev in zip(state.fields["sentence"].tolist(), prev_tokens.tolist()):
            probs = torch.zeros(STUB_VOCAB)
            for token, p in self.scripts.get(sentence, {}).get((state.step, prev), self.default).items():
                probs[token] = p
            rows.append(probs.log())
        state.step += 1
        return torch.stack(rows)  # (R, V): log-probabilities are valid logits


class ToyGRUModel(nn.Module):
    """A tiny random-weight model: dot-product attention over source embeddings and a GRU decoder.

    The decoder's hidden state is a ``state.fields`` entry and the attention keys a ``state.caches``
    entry, so both must follow ``reorder``.
    """

    max_output_tokens: int | None = None

    def __init__(self, vocab_size: int = 12, dim: int = 16, special_bias: float = 0.0) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(vocab_size, dim, padding_idx=PAD_ID)
        self.tgt_embed = nn.Embedding(vocab_size, dim)
        self.key = nn.Linear(dim, dim)
        self.cell = nn.GRUCell(dim, dim)
        self.out = nn.Linear(2 * dim, vocab_size)
        with torch.no_grad():
            self.out.weight.mul_(4.0)  # peakier distributions than the default init
            self.out.bias[[PAD_ID, BOS_ID]] += special_bias

    def forward(self, batch: Batch) -> Seq2SeqOutput:
        raise NotImplementedError("search never calls forward")

    def encode(self, batch: Batch) -> EncoderOutput:
        return EncoderOutput(self.src_embed(batch.src_tokens), batch.src_pad_mask)  # (B, S, D)

    def init_state(self, encoder_out: EncoderOutput) -> DecoderState:
        keep = (~encoder_out.pad_mask).unsqueeze(-1).float()  # (B, S, 1)
        mean = (encoder_out.states * keep).sum(1) / keep.sum(1)  # (B, D)
        caches = [{"keys": self.key(encoder_out.states)}]  # (B, S, D)
        return DecoderState(encoder_out, caches=caches, fields={"hidden": torch.tanh(mean)})

    def decode_step(self, prev_tokens: torch.Tensor, state: DecoderState) -> torch.Tensor:
        hidden = self.cell(self.tgt_embed(prev_tokens), state.fields["hidden"])  # (R, D)
        state.fields["hidden"] = hidden
        energy = (state.caches[0]["keys"] @ hidden.unsqueeze(2)).squeeze(2)  # (R, S)
        alpha = energy.masked_fill(state.encoder.pad_mask, float("-inf")).softmax(-1)  # (R, S)
        context = (alpha.unsqueeze(1) @ state.encoder.states).squeeze(1)  # (R, D)
        state.step += 1
        return self.out(torch.cat([hidden, context], dim=-1))  # (R, V)


def make_batch(src_lengths: list[int], ids: list[int] | None = None, seed: int = 0) -> Batch:
    """Random sources of the given lengths (EOS included), right-padded."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.full((len(src_lengths), max(src_lengths)), PAD_ID, dtype=torch.long)  # (B, S)
    for row, length in enumerate(src_lengths):
        src[row, : length - 1] = torch.randint(4, 12, (length - 1,), generator=generator)
        src[row, length - 1] = EOS_ID
    sentence_ids = torch.tensor(ids if ids is not None else range(len(src_lengths)))
    return Batch(src, torch.tensor(src_lengths), sentence_ids)


def row_of(batch: Batch, row: int) -> Batch:
    """Sentence ``row`` of ``batch`` alone, without padding."""
    length = int(batch.src_lengths[row])
    return Batch(
        batch.src_tokens[row : row + 1, :length], batch.src_lengths[row : row + 1], batch.ids[row : row + 1]
    )


@pytest.fixture(scope="module")
def toy() -> ToyGRUModel:
    torch.manual_seed(0)
    return ToyGRUModel().eval()


def expected(tokens: list[int], probs: list[float], length_penalty: float = 1.0) -> Hypothesis:
    """The hypothesis the formula gives for ``tokens`` whose tokens (EOS included) have ``probs``."""
    log_prob = sum(math.log(p) for p in probs)
    return Hypothesis(tokens, log_prob / (len(tokens) + 1) ** length_penalty, log_prob)


def assert_same(actual: list[Hypothesis], wanted: list[Hypothesis], tol: float = 1e-5) -> None:
    assert [h.tokens for h in actual] == [h.tokens for h in wanted]
    assert [h.log_prob for h in actual] == pytest.approx([h.log_prob for h in wanted], abs=tol)
    assert [h.score for h in actual] == pytest.approx([h.score for h in wanted], abs=tol)


def test_greedy_follows_the_argmax_path():
    model = ScriptedModel({0: ARGMAX_PATH}, MOSTLY_A)
    [hyps] = greedy_search(model, make_batch([4]))
    assert_same(hyps, [expected([A, A], [0.6, 0.5, 0.9])])


def test_beam_finds_the_path_greedy_misses():
    model = ScriptedModel({0: GARDEN_PATH}, MOSTLY_A)
    batch = make_batch([4])
    assert_same(greedy_search(model, batch)[0], [expected([A], [0.6, 0.4])])
    best_b, then_a = expected([B], [0.4, 0.9]), expected([A], [0.6, 0.4])
    assert_same(beam_search(model, batch, beam_size=2, nbest=2)[0], [best_b, then_a])


def test_batch_rows_keep_their_own_script():
    # Sentences finish at different steps, so rows are dropped and reordered while others go on.
    model = ScriptedModel({0: ARGMAX_PATH, 1: GARDEN_PATH, 2: SHORT_VS_LONG}, MOSTLY_A)
    batch = make_batch([3, 5, 4], ids=[2, 0, 1])
    together = beam_search(model, batch, beam_size=2, nbest=2)
    # GARDEN_PATH is done after step 1, ARGMAX_PATH after step 2 (its beam ends [B, A] and [A, A] there).
    assert model.rows_per_step == [6, 6, 4, 2]
    for row in range(3):
        assert_same(together[row], beam_search(model, row_of(batch, row), beam_size=2, nbest=2)[0])
    assert_same(together[2], [expected([B], [0.4, 0.9]), expected([A], [0.6, 0.4])])


def test_beam_size_one_equals_greedy_on_scripts():
    model = ScriptedModel({0: ARGMAX_PATH, 1: GARDEN_PATH, 2: SHORT_VS_LONG}, MOSTLY_A)
    batch = make_batch([3, 5, 4])
    assert beam_search(model, batch, beam_size=1) == greedy_search(model, batch)


def test_beam_size_one_equals_greedy_on_toy_model(toy):
    batch = make_batch([5, 2, 7, 4], seed=3)
    greedy = greedy_search(toy, batch)
    assert beam_search(toy, batch, beam_size=1) == greedy
    lengths = [len(hyps[0].tokens) for hyps in greedy]
    max_lens = max_output_lengths(batch.src_lengths, 1.2, 10).tolist()
    assert any(n < m for n, m in zip(lengths, max_lens)) and any(n == m for n, m in zip(lengths, max_lens))


@pytest.mark.parametrize("length_penalty", [0.0, 0.25, 0.5, 0.75, 1.0, 2.0])
def test_length_penalty_ranks_short_and_long_as_the_formula_says(length_penalty):
    model = ScriptedModel({0: SHORT_VS_LONG}, MOSTLY_A)
    [hyps] = beam_search(model, make_batch([4]), beam_size=2, length_penalty=length_penalty, nbest=2)
    short = expected([A], [0.55, 0.55], length_penalty)
    long = expected([B, A, A], [0.45, 0.9, 0.9, 0.5], length_penalty)
    assert short.log_prob > long.log_prob
    assert_same(hyps, sorted([short, long], key=lambda h: h.score, reverse=True))


def test_length_penalty_flips_the_ranking():
    model = ScriptedModel({0: SHORT_VS_LONG}, MOSTLY_A)
    batch = make_batch([4])
    assert beam_search(model, batch, beam_size=2, length_penalty=0.0)[0][0].tokens == [A]
    assert beam_search(model, batch, beam_size=2, length_penalty=1.0)[0][0].tokens == [B, A, A]


def test_max_output_lengths_formula():
    lengths = max_output_lengths(torch.tensor([3, 6, 1]), 1.5, 1)
    assert lengths.tolist() == [math.floor(1.5 * 3 + 1), math.floor(1.5 * 6 + 1), math.floor(1.5 * 1 + 1)]
    assert max_output_lengths(torch.tensor([3, 6, 1]), 1.5, 1, limit=7).tolist() == [5, 7, 2]


def test_outputs_stop_at_the_transformer_position_table():
    cfg = load_config(None, ["model.preset=tiny", "model.max_positions=8"]).model
    torch.manual_seed(0)
    model = build_model(cfg, 12, 12).model.eval()
    assert model.max_output_tokens == 7
    batch = make_batch([8, 3], seed=1)  # the longest source the model takes; 1.2 * 8 + 10 > 7 outputs
    for search in (greedy_search, lambda m, b: beam_search(m, b, beam_size=3, nbest=3)):
        hyps = search(model, batch)
        assert all(len(h.tokens) <= 7 for sentence in hyps for h in sentence)


def test_max_length_is_respected():
    model = ScriptedModel({}, MOSTLY_A)  # EOS is never the most likely token
    batch = make_batch([3, 6])
    max_lens = [5, 10]  # floor(1.5 * 3 + 1), floor(1.5 * 6 + 1)
    greedy = greedy_search(model, batch, max_len_a=1.5, max_len_b=1)
    for hyps, max_len in zip(greedy, max_lens):
        assert_same(hyps, [expected([A] * max_len, [0.8] * max_len + [0.05])])
    beams = beam_search(model, batch, beam_size=3, max_len_a=1.5, max_len_b=1, nbest=3)
    for hyps, max_len in zip(beams, max_lens):
        assert all(len(h.tokens) <= max_len for h in hyps)
        assert hyps[0].tokens == [A] * max_len


def test_max_length_on_toy_model(toy):
    batch = make_batch([5, 2, 7], seed=2)
    for hyps in beam_search(toy, batch, beam_size=4, max_len_a=0.0, max_len_b=2, nbest=4):
        assert all(len(h.tokens) <= 2 for h in hyps)


def test_nbest_distinct_and_sorted(toy):
    batch = make_batch([5, 2, 7], seed=3)
    for length_penalty in (0.0, 1.0):
        for hyps in beam_search(toy, batch, beam_size=5, length_penalty=length_penalty, nbest=4):
            assert len(hyps) == 4
            assert len({tuple(h.tokens) for h in hyps}) == 4
            assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
            for h in hyps:
                assert h.score == pytest.approx(h.log_prob / (len(h.tokens) + 1) ** length_penalty)
    with pytest.raises(ValueError, match="nbest"):
        beam_search(toy, batch, beam_size=2, nbest=3)


@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 2.0])
def test_batched_equals_per_sentence(toy, length_penalty):
    batch = make_batch([5, 2, 7, 4], seed=3)  # some sentences end with EOS, others at the maximum length
    together_beam = beam_search(toy, batch, beam_size=5, length_penalty=length_penalty, nbest=5)
    together_greedy = greedy_search(toy, batch, length_penalty=length_penalty)
    for row in range(4):
        single = row_of(batch, row)
        assert_same(together_beam[row], beam_search(toy, single, 5, length_penalty=length_penalty, nbest=5)[0])
        assert_same(together_greedy[row], greedy_search(toy, single, length_penalty=length_penalty)[0])


def test_minimum_length_gives_way_to_each_sentence_maximum():
    # Maximum lengths 1 and 5 (1.0 * source length): the first sentence gets EOS forced at step 1 although
    # min_len is 4, the second may not end before 4 tokens and then takes the likely EOS.
    model = ScriptedModel({0: ARGMAX_PATH, 1: ARGMAX_PATH}, {EOS_ID: 0.7, A: 0.2, B: 0.1})
    batch = make_batch([1, 5])
    options = {"max_len_a": 1.0, "max_len_b": 0, "min_len": 4}
    short, long = greedy_search(model, batch, **options)
    assert_same(short, [expected([A], [0.6, 0.3])])
    assert_same(long, [expected([A, A, B, A], [0.6, 0.5, 0.1, 0.2, 0.7])])
    short, long = beam_search(model, batch, beam_size=2, nbest=2, **options)
    assert [len(h.tokens) for h in short] == [1, 1] and all(4 <= len(h.tokens) <= 5 for h in long)


def test_special_tokens_never_inside_hypotheses():
    toy_with_specials = ToyGRUModel(special_bias=6.0).eval()
    models = [ScriptedModel({}, SPECIALS_LIKELY), toy_with_specials]
    batch = make_batch([5, 2, 7], seed=5)
    for model in models:
        results = greedy_search(model, batch) + beam_search(model, batch, beam_size=4, nbest=4)
        tokens = [t for hyps in results for h in hyps for t in h.tokens]
        assert tokens and not {PAD_ID, BOS_ID, EOS_ID} & set(tokens)


@pytest.mark.parametrize("preset", ["tiny", "rnn-tiny"])
def test_cached_steps_after_beam_reordering_equal_a_full_pass(preset):
    """``decode_step`` on a state that search reordered (hypotheses moved within their sentence, a finished
    sentence dropped) gives each row the logits of a teacher-forced pass over its own prefix."""
    cfg = load_config(None, [f"model.preset={preset}", "model.dropout=0"]).model
    torch.manual_seed(0)
    model = build_model(cfg, 12, 12).model.eval()
    batch, beam = make_batch([5, 2, 7], seed=4), 3
    generator = torch.Generator().manual_seed(1)
    sentences = torch.arange(3).repeat_interleave(beam)  # (R,) batch row of each hypothesis
    prefixes = torch.full((3 * beam, 1), BOS_ID)  # (R, t)
    with torch.inference_mode():
        state = model.init_state(model.encode(batch))
        state.repeat_rows(beam)
        for step in range(5):
            logits = model.decode_step(prefixes[:, -1], state)  # (R, V)
            forced = Batch(batch.src_tokens[sentences], batch.src_lengths[sentences], sentences, prefixes, prefixes)
            torch.testing.assert_close(logits, model(forced).logits[:, -1], atol=1e-5, rtol=0)
            active = sentences.numel() // beam
            rows = torch.arange(active).repeat_interleave(beam) * beam + torch.randint(
                0, beam, (active * beam,), generator=generator)  # each hypothesis from one of its sentence's
            if step == 1:  # the second sentence is done
                rows = rows.view(active, beam)[[0, 2]].view(-1)
            state.reorder(rows, same_sources=rows.numel() == sentences.numel())
            next_tokens = torch.randint(4, 12, (rows.numel(), 1), generator=generator)
            sentences, prefixes = sentences[rows], torch.cat([prefixes[rows], next_tokens], dim=1)


@pytest.mark.parametrize("beam_size", [1, 3, 5])
def test_top_candidates_equal_a_top_k_over_every_hypothesis_and_token(beam_size):
    """The fast path ranks each row's best 2K tokens only; it must pick what a top-k over all K * V does."""
    generator = torch.Generator().manual_seed(beam_size)
    num_active, vocab = 6, 40
    scores = torch.randn(num_active * beam_size, generator=generator) * 3
    scores.view(num_active, beam_size)[::2, 1:] = float("-inf")  # half the beams as at step 0: one hypothesis
    lprobs = torch.randn(num_active * beam_size, vocab, generator=generator).log_softmax(dim=1)
    candidates = _top_candidates(scores, lprobs, beam_size)
    every = (scores.unsqueeze(1) + lprobs).view(num_active, beam_size * vocab)  # (A, K*V)
    best_scores, best = every.topk(2 * beam_size, dim=1)
    first_row = torch.arange(num_active).unsqueeze(1) * beam_size
    torch.testing.assert_close(candidates.scores, best_scores, rtol=0, atol=0)
    torch.testing.assert_close(candidates.rows, first_row + best.div(vocab, rounding_mode="floor"))
    torch.testing.assert_close(candidates.tokens, best.remainder(vocab))
