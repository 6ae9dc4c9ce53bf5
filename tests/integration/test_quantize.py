"""Dynamic int8 translation (``ordo translate --int8``): close to float32, a copy, CPU only."""

import numpy as np
import pytest
import sacrebleu
import torch
from torch import nn

from ordo.build import build_model
from ordo.cli import main
from ordo.config import load_config
from ordo.data.batch import Batch
from ordo.data.textio import read_lines
from ordo.decoding.quantize import quantize_int8
from ordo.errors import ConfigError
from ordo.models.transformer import OutputProjection

VOCAB = 60


def tiny(*overrides):
    cfg = load_config(None, ["model.preset=tiny", "model.dropout=0", *overrides]).model
    torch.manual_seed(0)
    return build_model(cfg, VOCAB, VOCAB).model.eval()


def batch():
    generator = torch.Generator().manual_seed(1)
    src = torch.randint(4, VOCAB, (4, 9), generator=generator)
    src[2, 5:] = 0
    tgt_in = torch.randint(4, VOCAB, (4, 7), generator=generator)
    return Batch(src, torch.tensor([9, 9, 5, 9]), torch.arange(4), tgt_in, tgt_in.clone())


@pytest.mark.parametrize("overrides", [
    (), ("model.share_embeddings=none",), ("model.preset=rnn-tiny",), ("model.methods.future_cost.model=2",),
    ("model.methods.reorder_emb.variant=both",),
], ids=["tied", "untied", "rnn", "future_cost_2", "reorder_emb"])
def test_int8_logits_stay_close_to_float32_and_the_original_is_untouched(overrides):
    model = tiny(*overrides)
    data = batch()
    with torch.inference_mode():
        reference = model(data).logits
        quantized = quantize_int8(model)
        logits = quantized(data).logits
        again = model(data).logits
    assert not any(isinstance(m, nn.Linear) for m in quantized.modules()), "every projection is quantized"
    assert torch.equal(again, reference), "the float model is left unchanged"
    correlation = torch.corrcoef(torch.stack([reference.flatten(), logits.flatten()]))[0, 1]
    assert correlation > 0.995
    error = (logits - reference).abs().max() / reference.abs().max()
    assert 0 < error < 0.05, "int8 rounding changes the logits a little, not a lot"


def test_tied_output_projection_becomes_a_quantized_copy():
    model = tiny()
    assert isinstance(model.output, OutputProjection)
    quantized = quantize_int8(model)
    assert isinstance(model.output, OutputProjection) and model.output.weight is model.decoder.embed.weight
    assert type(quantized.output).__name__ == "Linear" and quantized.output.weight().dtype == torch.qint8


def test_int8_on_a_model_off_the_cpu_is_refused():
    with pytest.raises(ConfigError, match="CPU only"):
        quantize_int8(tiny().to("meta"))


def test_int8_translation_under_autocast_is_refused():
    from ordo.config import DecodeConfig
    from ordo.decoding.translator import translate_rows

    rows = [np.array([5, 6, 7])]
    with pytest.raises(ConfigError, match="decode.amp bf16: an int8 model translates in float32"):
        translate_rows(quantize_int8(tiny()), rows, DecodeConfig(amp="bf16"))
    assert len(translate_rows(quantize_int8(tiny()), rows, DecodeConfig(beam_size=2, max_len_b=3))) == 1


def test_translate_int8_scores_its_translations_as_float32_does(trained_run, small_data, tmp_path):
    source = small_data / "test.src.txt"
    best = {}
    for name, flags in (("fp32", []), ("int8", ["--int8"])):
        out = tmp_path / name
        assert main(["translate", "--model", str(trained_run), "--checkpoint", "last", "--input", str(source),
                     "--output", str(out), "--beam", "4", "--nbest", "2", *flags]) == 0
        rows = [line.split(" ||| ") for line in read_lines(out)]
        best[name] = {int(i): (text, float(score)) for i, text, score in reversed(rows)}  # first of each n-best
    assert len(best["fp32"]) == len(best["int8"]) == len(read_lines(source))
    order = sorted(best["fp32"])
    closeness = sacrebleu.corpus_bleu([best["int8"][i][0] for i in order], [[best["fp32"][i][0] for i in order]])
    assert closeness.score > 50, "int8 translations are close to float32's (this model is barely trained)"
    same = [i for i in best["fp32"] if best["fp32"][i][0] == best["int8"][i][0]]
    gaps = [abs(best["fp32"][i][1] - best["int8"][i][1]) for i in same]
    assert 0 < max(gaps) < 0.1, "the same translation gets nearly the same length-normalised score"
