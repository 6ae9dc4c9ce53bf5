"""Translation under autocast (``ordo translate --amp bf16``) and the mixed-precision settings.

The CPU tests run everywhere; the CUDA tests run where a GPU is present (they are how the GPU path is checked
on a lent machine: ``python -m pytest tests/integration/test_mixed_precision.py``)."""

import numpy as np
import pytest
import sacrebleu
import torch
from torch import nn

from ordo import api
from ordo.cli import main
from ordo.data.batch import PAD_ID
from ordo.data.batching import collate
from ordo.data.textio import read_lines

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def projection_dtypes(run: api.LoadedRun, sentences: list[str], **decode) -> set[torch.dtype]:
    """The dtypes the model's linear layers return while ``run`` translates ``sentences``."""
    seen: set[torch.dtype] = set()
    hooks = [m.register_forward_hook(lambda _m, _i, out: seen.add(out.dtype))
             for m in run.model.modules() if isinstance(m, nn.Linear)]
    try:
        run.translate(sentences, **decode)
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def test_translation_runs_in_bf16_only_when_asked(trained_run, small_data):
    run = api.load_run(trained_run, "last", device="cpu")
    sentences = read_lines(small_data / "test.src.txt")[:8]
    assert projection_dtypes(run, sentences) == {torch.float32}
    assert projection_dtypes(run, sentences, amp="bf16") == {torch.bfloat16}
    assert projection_dtypes(run, sentences) == {torch.float32}, "the setting does not outlive the call"


def test_translate_amp_bf16_stays_close_to_float32(trained_run, small_data, tmp_path):
    source = small_data / "test.src.txt"
    outputs = {}
    for name, flags in (("fp32", []), ("bf16", ["--amp", "bf16"])):
        out = tmp_path / name
        assert main(["translate", "--model", str(trained_run), "--checkpoint", "last", "--input", str(source),
                     "--output", str(out), "--beam", "4", "--device", "cpu", *flags]) == 0
        outputs[name] = read_lines(out)
    assert len(outputs["bf16"]) == len(read_lines(source))
    closeness = sacrebleu.corpus_bleu(outputs["bf16"], [outputs["fp32"]]).score
    assert closeness > 50, "bf16 rounding changes a few words, not the translations"


@cuda
def test_training_on_cuda_in_bf16_lowers_the_loss(cuda_run):
    from ordo.checkpoint import load_checkpoint, step_checkpoints

    losses = [load_checkpoint(p)["valid"]["loss"] for p in step_checkpoints(cuda_run / "checkpoints")]
    assert len(losses) == 2 and losses[1] < losses[0] < 5.5


@cuda
def test_cuda_translation_matches_the_cpu_and_bf16_stays_close(cuda_run, small_data):
    sentences = read_lines(small_data / "test.src.txt")
    on_cpu = api.load_run(cuda_run, "last", device="cpu").translate(sentences, beam_size=4)
    on_gpu = api.load_run(cuda_run, "last", device="cuda")
    same = sum(a == b for a, b in zip(on_gpu.translate(sentences, beam_size=4), on_cpu))
    assert same >= 0.95 * len(sentences), "float32 on the GPU searches as on the CPU (ties may round apart)"
    assert projection_dtypes(on_gpu, sentences[:4], amp="bf16") == {torch.bfloat16}
    closeness = sacrebleu.corpus_bleu(on_gpu.translate(sentences, beam_size=4, amp="bf16"), [on_cpu]).score
    assert closeness > 50


@cuda
def test_cuda_bf16_logits_of_a_batch_stay_close_to_float32(cuda_run, small_data):
    run = api.load_run(cuda_run, "last", device="cuda")
    rows, fields = run.encode_inputs(read_lines(small_data / "test.src.txt")[:16], "test")
    batch = collate(np.arange(len(rows)), rows, field_rows=fields).to(run.device)
    with torch.inference_mode():
        reference = run.model.encode(batch).states
        with torch.autocast("cuda", dtype=torch.bfloat16):
            states = run.model.encode(batch).states
    real = batch.src_tokens.ne(PAD_ID)
    error = (states.float() - reference)[real].abs().max() / reference[real].abs().max()
    assert 0 < error < 0.05, "bf16 matmuls round a little (the last LayerNorm returns float32 under autocast)"
