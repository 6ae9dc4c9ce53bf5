"""The compiled training step (train.compile, ordo.training.compiled): the eager step's loss and gradients, in one
graph, and the dense loss it uses equal to the chunked one; batches padded to a multiple (train.pad_multiple, for
shapes that repeat) train as the unpadded ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

from ordo.build import build_model
from ordo.config import load_config
from ordo.data.batch import PAD_ID, Batch
from ordo.data.batching import collate
from ordo.losses import dense_output_nll, output_nll
from ordo.training.compiled import batch_pad_multiple, forward_losses

VOCAB = 30


def tiny() -> torch.nn.Module:
    """The smallest Transformer (d 16, one layer a side) without dropout, seeded."""
    overrides = ["model.preset=tiny", "model.dropout=0", "model.d_model=16", "model.ffn_dim=32", "model.heads=2",
                 "model.encoder_layers=1", "model.decoder_layers=1"]
    torch.manual_seed(0)
    return build_model(load_config(None, overrides).model, VOCAB, VOCAB).model


def padded_batches() -> list[Batch]:
    """Two batches of different shapes (a compiled step must not recompile for each), padded on both sides."""
    batches = []
    for seed, (rows, src_len, tgt_len) in enumerate([(3, 7, 6), (4, 9, 5)]):
        generator = torch.Generator().manual_seed(seed)
        src = torch.randint(4, VOCAB, (rows, src_len), generator=generator)
        lengths = torch.full((rows,), src_len)
        src[1, 3:], lengths[1] = PAD_ID, 3
        tgt = torch.randint(4, VOCAB, (rows, tgt_len), generator=generator)
        tgt_out = tgt.clone()
        tgt_out[0, -2:] = PAD_ID
        batches.append(Batch(src, lengths, torch.arange(rows), tgt, tgt_out, {}))
    return batches


def losses_and_grads(mode: str, batches: list[Batch]) -> list[tuple[torch.Tensor, ...]]:
    """(loss, nll, every parameter's gradient) per batch, from a fresh seeded model through ``forward_losses``."""
    model = tiny()
    step = forward_losses(model, [], 0.1, mode)  # type: ignore[arg-type]
    results = []
    for batch in batches:
        model.zero_grad()
        loss, nll, _ = step(batch)
        loss.backward()
        results.append((loss.detach(), nll, *(p.grad.clone() for p in model.parameters())))
    return results


def test_dense_loss_equals_the_chunked_loss_and_its_gradients() -> None:
    torch.manual_seed(0)
    hidden = torch.randn(3, 5, 8, requires_grad=True)
    project = torch.nn.Linear(8, 11)
    targets = torch.randint(4, 11, (3, 5))
    targets[1, 3:] = PAD_ID
    results = []
    for loss_fn in (output_nll, dense_output_nll):
        hidden.grad, project.weight.grad, project.bias.grad = None, None, None
        loss, nll = loss_fn(hidden, project, targets, 0.1)
        loss.backward()
        results.append((loss.detach(), nll, hidden.grad.clone(), project.weight.grad.clone(), project.bias.grad.clone()))
    for chunked, dense in zip(*results):
        torch.testing.assert_close(dense, chunked, rtol=1e-5, atol=1e-6)
    assert float(results[0][2][1, 3:].abs().sum()) == 0.0  # padded positions get no gradient


def test_a_compiled_step_gives_the_eager_loss_and_gradients_in_one_graph() -> None:
    torch._dynamo.reset()
    counters.clear()
    batches = padded_batches()
    eager = losses_and_grads("off", batches)
    compiled = losses_and_grads("default", batches)
    for eager_batch, compiled_batch in zip(eager, compiled):
        for expected, got in zip(eager_batch, compiled_batch):
            torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    # one graph for both shapes: no graph break splits the step, no new shape recompiles it
    assert counters["stats"]["unique_graphs"] == 1
    assert not counters["graph_break"]


def test_the_eager_step_keeps_token_packing_and_a_compiled_one_turns_it_off() -> None:
    eager_model, compiled_model = tiny(), tiny()
    forward_losses(eager_model, [], 0.1, "off")
    forward_losses(compiled_model, [], 0.1, "default")
    assert eager_model.encoder.pack_below > 0.0
    assert compiled_model.encoder.pack_below == 0.0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run by bench/gpu/check.sh)")
def test_on_a_gpu_a_compiled_bf16_step_gives_the_eager_loss_and_gradients() -> None:
    batches = [batch.to(torch.device("cuda")) for batch in padded_batches()]
    results = {}
    for mode in ("off", "default"):
        model = tiny().cuda()
        step = forward_losses(model, [], 0.1, mode)  # type: ignore[arg-type]
        model.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss, _, _ = step(batches[0])
        loss.backward()
        results[mode] = [loss.detach().float(), *(p.grad.float() for p in model.parameters())]
    for expected, got in zip(results["off"], results["default"]):
        torch.testing.assert_close(got, expected, rtol=2e-2, atol=2e-3)  # bf16 products: ~3 significant digits


def test_lengths_padded_to_a_multiple_give_the_same_loss_and_gradients() -> None:
    generator = torch.Generator().manual_seed(3)
    src = [torch.randint(4, VOCAB, (n,), generator=generator).numpy() for n in (5, 9, 3)]
    tgt = [torch.randint(4, VOCAB, (n,), generator=generator).numpy() for n in (6, 4, 7)]
    results = []
    for multiple in (1, 8):
        batch = collate(np.arange(3), src, tgt, pad_multiple=multiple)
        results.append(losses_and_grads("off", [batch])[0])
        if multiple == 8:
            assert batch.src_tokens.shape == (3, 16) and batch.tgt_in.shape == (3, 8)  # 9 + EOS, 7 + BOS
    for plain, padded in zip(*results):
        torch.testing.assert_close(padded, plain, rtol=1e-5, atol=1e-6)


def test_a_compiled_step_pads_lengths_to_8_unless_told_otherwise() -> None:
    assert batch_pad_multiple(0, "default") == 8  # aligned lengths: one CUDA graph of inductor's kernels, not two
    assert batch_pad_multiple(0, "reduce-overhead") == 8
    assert batch_pad_multiple(0, "off") == 1  # eager: no padding beyond the longest row
    assert batch_pad_multiple(3, "default") == 3
    assert batch_pad_multiple(16, "off") == 16
