"""Baseline Transformer: shapes, masking, incremental decoding equals a full pass, Shaw attention."""

import dataclasses
import inspect
from types import SimpleNamespace

import pytest
import torch

from ordo.build import build_model, count_parameters
from ordo.config import load_config
from ordo.data.batch import Batch
from ordo.models.attention import (
    CrossAttention,
    RelationSelfAttention,
    SelfAttention,
    key_padding_to_attn_mask,
    length_groups,
    merge_heads,
    prefix_lengths,
    split_heads,
)
from ordo.models.embeddings import sinusoidal_table


def tiny_model(*overrides, vocab=50):
    cfg = load_config(None, ["model.preset=tiny", *overrides]).model
    torch.manual_seed(0)
    return build_model(cfg, vocab, vocab).model.eval()


def make_batch(vocab=50):
    torch.manual_seed(1)
    src = torch.randint(4, vocab, (3, 7))
    src[1, 4:] = 0
    tgt_in = torch.randint(4, vocab, (3, 6))
    return Batch(src, torch.tensor([7, 4, 7]), torch.arange(3), tgt_in, tgt_in.clone())


def test_sinusoidal_table_matches_formula():
    table = sinusoidal_table(10, 8)
    p, i = 3, 1
    assert torch.isclose(table[p, 2 * i], torch.tensor(torch.sin(torch.tensor(p / 10000 ** (2 * i / 8))).item()))
    assert torch.isclose(table[p, 2 * i + 1], torch.cos(torch.tensor(p / 10000 ** (2 * i / 8))))


def test_incremental_decoding_equals_full_forward_post_and_pre_norm():
    for norm in ("post", "pre"):
        model = tiny_model(f"model.norm={norm}")
        batch = make_batch()
        full = model(batch).logits
        state = model.init_state(model.encode(batch))
        steps = torch.stack([model.decode_step(batch.tgt_in[:, t], state) for t in range(6)], dim=1)
        assert torch.allclose(full, steps, atol=1e-5), norm


def test_padding_does_not_change_encoder_states():
    model = tiny_model()
    batch = make_batch()
    alone = Batch(batch.src_tokens[1:2, :4], torch.tensor([4]), torch.arange(1), batch.tgt_in[1:2], batch.tgt_in[1:2])
    padded_states = model.encode(batch).states[1, :4]
    assert torch.allclose(model.encode(alone).states[0], padded_states, atol=1e-5)


def test_decoder_is_causal():
    model = tiny_model()
    batch = make_batch()
    before = model(batch).logits[:, :3]
    batch.tgt_in[:, 4] = 5
    assert torch.allclose(model(batch).logits[:, :3], before, atol=1e-6)


def test_shared_embeddings_counted_once():
    shared = count_parameters(tiny_model("model.share_embeddings=all", vocab=1000))
    separate = count_parameters(tiny_model("model.share_embeddings=none", vocab=1000))
    assert separate - shared == 2 * 1000 * 64


def test_the_baseline_has_no_relation_parameters_arguments_or_hooks():
    """Relation ids belong to methods (relative_pe, lattice_attn), whose attention reads them from the encoder
    context: a baseline model has no relation parameters, and its classes take no ``relations`` argument."""
    from ordo.models.slots import Slots
    from ordo.models.transformer import (
        EncoderContext,
        TransformerDecoder,
        TransformerDecoderLayer,
        TransformerEncoder,
        TransformerEncoderLayer,
        TransformerModel,
    )

    model = tiny_model()
    assert not [name for name, _ in model.named_parameters() if "rel" in name]
    assert not [module for module in model.modules() if isinstance(module, RelationSelfAttention)]
    signatures = [SelfAttention.forward, CrossAttention.forward, EncoderContext, TransformerEncoderLayer.forward,
                  TransformerEncoderLayer.sublayers, TransformerDecoderLayer.forward, TransformerEncoder,
                  TransformerEncoder.forward, TransformerDecoder.forward, TransformerModel.forward]
    for function in signatures:
        assert not [name for name in inspect.signature(function).parameters if "relation" in name], function
    objects = [model.encoder, model.encoder.layers[0], model.decoder.layers[0], model.encoder.layers[0].self_attn]
    assert not [name for thing in objects for name in dir(thing) if "relation" in name]
    assert not [f.name for cls in (EncoderContext, Slots) for f in dataclasses.fields(cls) if "relation" in f.name]


def relations_field(batch):
    """The relation ids a test batch carries (a method makes them from the batch)."""
    return batch.fields["relations"]


def context_with(relations):
    """A stand-in for the encoder's context, whose batch carries ``relations``."""
    batch = SimpleNamespace(fields={"relations": relations})
    return SimpleNamespace(per_batch=lambda make: make(batch))


def test_relation_attention_equals_hand_computation_and_plain_when_zero():
    torch.manual_seed(0)
    attn = RelationSelfAttention(dim=8, heads=2, num_relations=3, relations_of=relations_field).eval()
    x = torch.randn(1, 4, 8)
    relations = torch.randint(0, 3, (1, 4, 4))
    out = attn(x, context=context_with(relations))
    q, k, v = attn.qkv(x).chunk(3, dim=-1)
    expected = []
    for h in range(2):
        qh, kh, vh = (t[0, :, 4 * h : 4 * h + 4] for t in (q, k, v))
        ak, av = attn.rel_keys.weight[relations[0]], attn.rel_values.weight[relations[0]]  # (4, 4, Dh)
        scores = torch.einsum("ad,abd->ab", qh, kh.unsqueeze(0) + ak) / 2.0
        alpha = scores.softmax(-1)
        expected.append(torch.einsum("ab,abd->ad", alpha, vh.unsqueeze(0) + av))
    assert torch.allclose(out[0], attn.out(torch.cat(expected, -1)), atol=1e-5)
    plain = SelfAttention(8, 2).eval()
    plain.load_state_dict({k: v for k, v in attn.state_dict().items() if not k.startswith("rel_")})
    with torch.no_grad():
        attn.rel_keys.weight.zero_()
        attn.rel_values.weight.zero_()
    mask = key_padding_to_attn_mask(torch.tensor([[False, False, False, True]]))
    assert torch.allclose(attn(x, mask, context=context_with(relations))[:, :3], plain(x, mask)[:, :3], atol=1e-5)


def test_relation_attention_with_padding_matches_hand_computation_in_value_and_gradient():
    torch.manual_seed(1)
    attn = RelationSelfAttention(dim=8, heads=2, num_relations=4, relations_of=relations_field).train()
    relations = torch.randint(0, 4, (2, 5, 5))
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    x = torch.randn(2, 5, 8, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    real = ~pad[:, :, None]  # padded query positions output zeros (rows are attended by length)
    got = attn(x, key_padding_to_attn_mask(pad), context=context_with(relations))
    got.mul(real).pow(2).sum().backward()
    q, k, v = (t.view(2, 5, 2, 4).transpose(1, 2) for t in attn.qkv(x_ref).chunk(3, dim=-1))  # (B, H, T, Dh)
    ak, av = attn.rel_keys.weight[relations], attn.rel_values.weight[relations]  # (B, T, T, Dh)
    scores = (torch.einsum("bhad,bhcd->bhac", q, k)
              + torch.einsum("bhad,bacd->bhac", q, ak)) / 2.0
    alpha = scores.masked_fill(pad[:, None, None, :], float("-inf")).softmax(-1)
    out = torch.einsum("bhac,bhcd->bhad", alpha, v) + torch.einsum("bhac,bacd->bhad", alpha, av)
    expected = attn.out(out.transpose(1, 2).reshape(2, 5, 8))
    expected.mul(real).pow(2).sum().backward()
    assert torch.allclose(got * real, expected * real, atol=1e-5) and torch.allclose(x.grad, x_ref.grad, atol=1e-5)


def test_length_groups_keep_rows_within_the_ratio_of_their_longest():
    lengths = torch.tensor([3, 10, 4, 9, 13, 2, 12])
    groups = [(rows.tolist(), longest) for rows, longest in length_groups(lengths, 1.3)]
    assert groups == [([6, 4], 13), ([3, 1], 10), ([2], 4), ([0], 3), ([5], 2)]  # 13 / 1.3 = 10 is not > 10
    assert sorted(row for rows, _ in groups for row in rows) == list(range(7))


def test_prefix_lengths_only_for_masks_that_pad_at_the_end():
    mask = key_padding_to_attn_mask(torch.tensor([[False, False, True], [False, False, False]]))
    assert prefix_lengths(mask).tolist() == [2, 3]
    assert prefix_lengths(key_padding_to_attn_mask(torch.tensor([[True, False, False]]))) is None


@pytest.mark.parametrize("relation_rows", [8, 1])  # per sentence (lattices) or shared (relative positions)
def test_relation_attention_by_length_groups_equals_the_whole_padded_batch(relation_rows: int):
    torch.manual_seed(2)
    attn = RelationSelfAttention(dim=8, heads=2, num_relations=4, relations_of=relations_field).eval()
    lengths = torch.tensor([2, 11, 5, 12, 7, 3, 12, 9])
    pad = torch.arange(12)[None, :] >= lengths[:, None]
    mask, real = key_padding_to_attn_mask(pad), ~pad[:, :, None]
    relations = torch.randint(0, 4, (relation_rows, 12, 12))
    assert len(length_groups(lengths, attn.GROUP_RATIO)) > 2
    results = []
    for grouped in (True, False):
        x = torch.randn(8, 12, 8, generator=torch.Generator().manual_seed(3), requires_grad=True)
        attn.zero_grad()
        if grouped:
            out = attn(x, mask, context=context_with(relations))
        else:  # the ungrouped computation: Eq. 3-4 over the whole padded batch
            q, k, v = (split_heads(t, 2) for t in attn.qkv(x).chunk(3, dim=-1))
            out = attn.out(merge_heads(attn.attend(q * 0.5, k, v, relations, mask, causal=False)))
        out.mul(real).pow(2).sum().backward()
        results.append((out * real, x.grad, attn.rel_keys.weight.grad.clone(), attn.rel_values.weight.grad.clone()))
    for got, expected in zip(*results):
        assert torch.allclose(got, expected, atol=1e-5)


def test_relation_attention_gradients_reach_relation_tables():
    attn = RelationSelfAttention(dim=8, heads=2, num_relations=5, relations_of=relations_field)
    attn(torch.randn(2, 3, 8), context=context_with(torch.randint(0, 5, (1, 3, 3)))).sum().backward()
    assert attn.rel_keys.weight.grad.abs().sum() > 0 and attn.rel_values.weight.grad.abs().sum() > 0


def test_beam_one_equals_greedy_and_batched_equals_single_on_the_transformer():
    from ordo.decoding.search import beam_search, greedy_search

    model = tiny_model()
    batch = make_batch()
    greedy = greedy_search(model, batch, max_len_a=1.0, max_len_b=4)
    beam1 = beam_search(model, batch, beam_size=1, max_len_a=1.0, max_len_b=4)
    assert [h[0].tokens for h in greedy] == [h[0].tokens for h in beam1]
    beam4 = beam_search(model, batch, beam_size=4, max_len_a=1.0, max_len_b=4)
    alone = Batch(batch.src_tokens[1:2, :4], batch.src_lengths[1:2], torch.arange(1))
    assert beam_search(model, alone, beam_size=4, max_len_a=1.0, max_len_b=4)[0][0].tokens == beam4[1][0].tokens


def test_minimum_length_holds_back_the_end_of_sentence_in_greedy_and_beam_search():
    from ordo.decoding.search import beam_search, greedy_search

    model = tiny_model()
    batch = make_batch()
    for search in (lambda **kw: greedy_search(model, batch, **kw), lambda **kw: beam_search(model, batch, 3, **kw)):
        exact = search(max_len_a=0.0, max_len_b=6, min_len=6)
        assert [len(h[0].tokens) for h in exact] == [6, 6, 6]
        free = search(max_len_a=0.0, max_len_b=6)
        assert all(len(h[0].tokens) <= 6 for h in free)


ENCODER_ATTENTION = {
    "sdpa": [],
    "relative_pe": ["model.methods.relative_pe.clip=2"],  # relation attention, ids shared by the rows
    "lattice_lsa": ["model.methods.lattice_attn={}", "model.methods.lattice_pe={}"],  # ids per row
}


def spans_batch() -> Batch:
    """:func:`make_batch` with rows of 7, 4 and 5 tokens (two length groups) and random lattice spans."""
    from ordo.data.lattice.graph import FIELD_END, FIELD_START

    batch = make_batch()
    batch.src_tokens[2, 5:] = 0
    batch.src_lengths[2] = 5
    start = torch.randint(0, 4, batch.src_tokens.shape, generator=torch.Generator().manual_seed(4))
    batch.fields = {FIELD_START: start, FIELD_END: start + 1 + start.remainder(2)}
    return batch


@pytest.mark.parametrize("attention", list(ENCODER_ATTENTION))
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_packing_real_tokens_gives_the_padded_results(norm: str, attention: str):
    """Both encoder sublayers on the packed real tokens (projections, residuals, FFN) give the padded
    computation's states at the real positions, logits and encoder gradients."""
    from ordo.models.transformer import EncoderContext

    batch = spans_batch()
    real = ~batch.src_pad_mask[:, :, None]
    results = []
    for pack_below in (0.9, 0.0):  # packed, then the padded computation
        packing = EncoderContext(batch.src_pad_mask, None, batch, pack_below).packing  # 16 of 21 real: packed at 0.9
        assert (packing is not None and packing.real_tokens.numel() == 16) == (pack_below == 0.9)
        model = tiny_model(f"model.norm={norm}", *ENCODER_ATTENTION[attention])
        model.encoder.pack_below = pack_below
        encoded = model.encode(batch)
        model(batch).logits.sum().backward()
        grads = [p.grad.clone() for p in model.encoder.parameters()]
        results.append((encoded.states * real, model(batch).logits, grads))
    (packed, packed_logits, packed_grads), (padded, padded_logits, padded_grads) = results
    assert torch.allclose(packed, padded, atol=1e-5) and torch.allclose(packed_logits, padded_logits, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(packed_grads, padded_grads))
