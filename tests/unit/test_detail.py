"""Per-sentence translation detail (ordo.detail, LoadedRun.translate_detailed): the recomputed cross-attention,
link units, and the data a notebook gets without the server."""

import numpy as np
import pytest
import torch

from ordo import api
from ordo.build import build_model
from ordo.config import load_config
from ordo.data.alignment.target_order import reorder_words, target_order
from ordo.decoding.attention import head_averaged_weights, recorded_cross_attention
from ordo.detail import text_ribes, units
from ordo.evaluation.order import alignment_tau, sentence_ribes
from ordo.models.attention import CrossAttention, key_padding_to_attn_mask, split_heads


def test_recomputed_weights_reproduce_the_fused_cross_attention_output():
    torch.manual_seed(0)
    module = CrossAttention(dim=8, heads=1).eval()
    queries, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    pad_mask = torch.tensor([[False] * 5, [False, False, False, True, True]])
    mask = key_padding_to_attn_mask(pad_mask)
    with torch.no_grad():
        weights = head_averaged_weights(module, queries, memory, mask)  # (B, T, S)
        fused = module(queries, memory, mask)
    values = split_heads(module.kv(memory).chunk(2, dim=-1)[1], 1).squeeze(1)  # (B, S, D)
    expected = module.out(weights @ values)
    assert torch.allclose(fused, expected, atol=1e-5)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3))
    assert float(weights[1, :, 3:].abs().max()) == 0.0  # padding gets no attention


def test_heads_are_averaged_and_the_hook_records_only_while_open():
    torch.manual_seed(1)
    module = CrossAttention(dim=8, heads=2).eval()
    queries, memory = torch.randn(1, 2, 8), torch.randn(1, 4, 8)
    q = split_heads(module.q(queries), 2)
    k = split_heads(module.kv(memory).chunk(2, dim=-1)[0], 2)
    per_head = (q @ k.transpose(-1, -2) / 2.0).softmax(-1)  # d_h = 4
    assert torch.allclose(head_averaged_weights(module, queries, memory, None), per_head.mean(1), atol=1e-6)

    class Holder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.decoder = torch.nn.ModuleList([CrossAttention(8, 2), module])

    holder = Holder()
    with recorded_cross_attention(holder) as recorded:
        module(queries, memory, None)
        holder.decoder[0](queries, memory, None)  # not the last one: not recorded
    module(queries, memory, None)
    assert len(recorded) == 1 and recorded[0].shape == (1, 2, 4)


def test_units_are_words_with_spaces_and_pieces_without():
    assert units("a cat sat", ["▁a", "▁c", "at", "▁sat"]) == (["a", "cat", "sat"], [1, 2, 1])
    assert units("猫が座った", ["▁猫", "が", "座った"]) == (["猫", "が", "座った"], [1, 1, 1])
    assert units("a b", ["a", "b"]) == (["a", "b"], [1, 1])  # a token vocabulary: no word marks


def test_text_ribes_tokenizes_like_the_corpus_measure():
    assert text_ribes("the cat sat.", "the cat sat .") == pytest.approx(1.0)  # 13a splits "sat." as "sat ."
    assert sentence_ribes(["the", "cat", "sat", "."], ["the", "cat", "sat."]) < 1.0
    assert text_ribes("c b a", "a b c") < text_ribes("a b c", "a b c") == pytest.approx(1.0)


def test_translate_detailed_gives_translate_s_outputs_with_consistent_word_order_data(loaded_run, small_test_sources):
    inputs = [*small_test_sources[:12], "", "中文 测试"]
    details = loaded_run.translate_detailed(inputs, beam_size=3, nbest=2)
    assert [d.translation for d in details] == loaded_run.translate(inputs, beam_size=3)
    for text, detail in zip(inputs, details):
        assert detail.nbest[0].text == detail.translation
        assert detail.nbest[0].score >= detail.nbest[-1].score
        if not text:
            assert detail.attention is None and detail.links == [] and detail.translation == ""
            continue
        assert detail.attention.shape == (len(detail.target_tokens), len(detail.source_tokens))
        assert np.all(detail.attention >= 0) and np.all(detail.attention.sum(1) <= 1 + 1e-5)
        assert {t for _, t in detail.links} == set(range(len(detail.target_units)))  # every target unit linked
        assert all(0 <= s < len(detail.source_units) for s, _ in detail.links)
        assert detail.tau == pytest.approx(alignment_tau(detail.links))
        assert detail.source_in_target_order == reorder_words(
            detail.source_units, target_order(len(detail.source_units), detail.links))
        assert detail.predicted_positions is None
    assert details[-1].source_units == ["中文", "测试"]  # the characters, not <unk>


def test_without_attention_and_with_references(loaded_run, small_test_sources):
    texts = small_test_sources[:3]
    details = loaded_run.translate_detailed(texts, attention=False, references=texts)
    assert all(d.attention is None and d.links == [] for d in details)
    assert [d.ribes for d in details] == [pytest.approx(text_ribes(d.translation, t))
                                          for d, t in zip(details, texts)]


def test_an_exgre_model_gives_its_predicted_target_order_positions(loaded_run):
    cfg = load_config(None, ["model.preset=tiny", "model.methods.exgre.weight=0.5"])
    torch.manual_seed(0)
    model = build_model(cfg.model, len(loaded_run.src_vocab), len(loaded_run.tgt_vocab), True).model.eval()
    exgre = api.LoadedRun(model, cfg, loaded_run.src_vocab, loaded_run.tgt_vocab, torch.device("cpu"))
    detail, = exgre.translate_detailed(["the red lazy hill dances ."], beam_size=2, max_len_b=3)
    positions = detail.predicted_positions
    assert positions is not None and len(positions) == len(detail.source_tokens)
    assert all(0 <= p <= len(detail.source_tokens) for p in positions)
