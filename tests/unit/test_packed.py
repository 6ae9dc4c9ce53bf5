"""A loaded run's linear layers hold their weights packed alone while oneDNN multiplies them (ordo.decoding.packed)."""

import gc
import weakref

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ordo import api, gemm
from ordo.decoding.packed import FrozenLinear, freeze_linear_layers

needs_onednn = pytest.mark.skipif(not gemm.onednn_available(), reason="this torch has no oneDNN linear kernel")
ZEN5 = {"vendor_id": "AuthenticAMD", "flags": "fpu avx avx2 fma avx512f avx512bw"}
ZEN3 = {"vendor_id": "AuthenticAMD", "flags": "fpu avx avx2 fma"}


def frozen_layer(out_features: int = 256, in_features: int = 256) -> tuple[FrozenLinear, torch.Tensor]:
    """A FrozenLinear of a random frozen gemm.Linear, and a copy of its weight."""
    torch.manual_seed(0)
    linear = gemm.Linear(in_features, out_features).requires_grad_(False)
    return FrozenLinear(linear), linear.weight.detach().clone()


@needs_onednn
def test_a_product_on_onednn_keeps_the_packed_copy_alone_and_computes_what_a_linear_layer_does():
    layer, weight = frozen_layer()
    plain = weakref.ref(layer._parameters["weight"])
    x = torch.randn(7, 256)
    with torch.inference_mode(), gemm.cpu_gemm("onednn"):
        expected = gemm.linear(x, weight, layer.bias)
        y = layer(x)
    gc.collect()
    assert torch.equal(y, expected), "the same oneDNN product on the same packed layout"
    assert layer.packed is not None and plain() is None, "the plain weight is let go"
    assert layer._parameters["weight"].is_meta and sum(p.numel() for p in layer.parameters()) == 256 * 257
    assert torch.equal(layer.state_dict()["weight"], weight) and layer.packed is not None, "saved plain, kept packed"
    assert torch.equal(layer.weight, weight) and layer.packed is None, "read back bit for bit"


@needs_onednn
@pytest.mark.parametrize("leaves_onednn", ["blas", "bf16 autocast", "gradients"])
def test_a_product_off_onednns_packed_path_restores_the_plain_weight_first(leaves_onednn):
    layer, weight = frozen_layer()
    x = torch.randn(3, 256)
    with torch.inference_mode(), gemm.cpu_gemm("onednn"):
        layer(x)
    assert layer.packed is not None
    if leaves_onednn == "blas":
        with torch.inference_mode(), gemm.cpu_gemm("blas"):
            assert torch.equal(layer(x), F.linear(x, weight, layer.bias))
    elif leaves_onednn == "bf16 autocast":
        with torch.inference_mode(), gemm.cpu_gemm("onednn"), torch.autocast("cpu", dtype=torch.bfloat16):
            assert layer(x).dtype == torch.bfloat16
    else:
        x.requires_grad_(True)
        with gemm.cpu_gemm("onednn"):
            layer(x).sum().backward()
        assert torch.allclose(x.grad, weight.sum(0).expand(3, -1), atol=1e-5)
    assert layer.packed is None and torch.equal(layer._parameters["weight"], weight)


@needs_onednn
@pytest.mark.parametrize("cpu, width, packs", [(ZEN5, 256, True), (ZEN5, 64, False), (ZEN3, 256, False)])
def test_auto_packs_alone_only_where_its_rule_sends_the_layer_to_onednn(monkeypatch, cpu, width, packs):
    monkeypatch.setattr(gemm.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(gemm, "cpuinfo", lambda: cpu)
    layer, weight = frozen_layer(width, 256)
    x = torch.randn(40, 256)  # above a beam's rows: the rule's backend, untimed
    with torch.inference_mode(), gemm.cpu_gemm("auto", timed=True):
        y = layer(x)
    assert (layer.packed is not None) == packs
    assert torch.allclose(y, F.linear(x, weight, layer.bias), atol=1e-5)


@needs_onednn
def test_loading_moving_and_training_a_packed_layer_restore_its_plain_weight():
    layer, weight = frozen_layer()
    with torch.inference_mode(), gemm.cpu_gemm("onednn"):
        layer(torch.randn(2, 256))
    layer.load_state_dict({"weight": weight * 2, "bias": layer.bias.detach()})
    assert layer.packed is None and torch.equal(layer.weight, weight * 2)
    with torch.inference_mode(), gemm.cpu_gemm("onednn"):
        layer(torch.randn(2, 256))
    assert layer.to(torch.float64).weight.dtype == torch.float64 and layer.packed is None
    with torch.inference_mode(), gemm.cpu_gemm("onednn"):
        layer.float()(torch.randn(2, 256))
    assert layer.packed is not None and layer.train(False).packed is not None, "eval mode keeps it packed"
    assert layer.train().packed is None and not any(p.is_meta for p in layer.parameters()), "ready to learn"


def test_only_wide_unshared_linear_layers_are_frozen():
    shared = gemm.Linear(256, 256)
    model = nn.Sequential(gemm.Linear(256, 512), shared, nn.Sequential(shared), nn.Linear(256, 256),
                          gemm.Linear(256, 64))
    freeze_linear_layers(model)
    assert [type(module).__name__ for module in (model[0], model[1], model[2][0], model[3], model[4])] == \
        ["FrozenLinear", "Linear", "Linear", "Linear", "Linear"]
    assert model[1] is shared and all(isinstance(module, nn.Linear) for module in model.modules() if module is not model
                                      and not isinstance(module, nn.Sequential)), "still linear layers to hooks"


@needs_onednn
def test_a_loaded_run_translates_alike_with_its_weights_packed_and_saves_them_plain(trained_run, monkeypatch):
    monkeypatch.setattr(gemm, "AUTO_MIN_WIDTH", 1)  # the tiny model's layers frozen too
    run = api.load_run(trained_run, "last", device="cpu")
    saved = {name: tensor.clone() for name, tensor in run.model.state_dict().items()}
    sources = ["the cat sees the dog", "a dog eats the fish"]
    blas = run.translate(sources, beam_size=3, cpu_gemm="blas")
    layers = [module for module in run.model.modules() if isinstance(module, FrozenLinear)]
    assert layers and all(layer.packed is None for layer in layers)
    assert run.translate(sources, beam_size=3, cpu_gemm="onednn") == blas
    assert all(layer.packed is not None for layer in layers)
    state = run.model.state_dict()
    assert state.keys() == saved.keys() and all(torch.equal(state[name], saved[name]) for name in saved)
    assert run.translate(sources, beam_size=3, cpu_gemm="blas") == blas
    assert all(layer.packed is None for layer in layers)
