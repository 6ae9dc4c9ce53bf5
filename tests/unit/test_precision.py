"""Mixed-precision settings (``train.amp``, ``decode.amp``): what each mode resolves to, per device, and the
CPU attention that stays in float32 under autocast while training."""

import pytest
import torch

from ordo import gemm
from ordo.config import load_config
from ordo.errors import ConfigError
from ordo.models.attention import fused_attention
from ordo.precision import amp_dtype, describe


@pytest.mark.parametrize("flags, on_cpu", [("fpu avx2 fma", None), ("avx2 avx512f avx512_bf16", torch.bfloat16),
                                            ("avx512f amx_tile amx_bf16", torch.bfloat16), ("avx512f", None)])
def test_auto_amp_is_bf16_on_a_cpu_with_native_bf16_only(monkeypatch, flags, on_cpu):
    monkeypatch.setattr(gemm, "cpu_flags", lambda: set(flags.split()))
    assert amp_dtype("auto", torch.device("cpu")) is on_cpu
    assert amp_dtype("auto", torch.device("cuda")) is torch.bfloat16
    assert amp_dtype("off", torch.device("cpu")) is None


def test_the_log_line_says_which_precision_auto_took_and_why(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setattr(gemm, "cpu_flags", lambda: {"avx2", "fma"})
    assert describe("auto", cpu).startswith("float32 (amp auto: no native bf16 on this CPU); float32 products on blas "
                                            "(cpu_gemm auto: ")
    monkeypatch.setattr(gemm, "cpu_flags", lambda: {"avx512f", "avx512_bf16"})
    assert describe("auto", cpu) == "bf16 autocast (amp auto: native bf16 on this CPU)"
    assert describe("off", cpu, "blas") == "float32 (amp off); float32 products on blas (cpu_gemm blas)"
    assert describe("fp16", torch.device("cuda")) == "fp16 autocast (amp fp16)"


def test_amp_modes_resolve_per_device_and_an_unknown_one_is_refused():
    assert amp_dtype("fp16", torch.device("cpu")) is torch.float16
    assert amp_dtype("off", torch.device("cuda")) is None
    with pytest.raises(ConfigError, match="train.amp: 'bf32' is not one of auto, bf16, fp16, off"):
        load_config(None, ["train.amp=bf32"])
    with pytest.raises(ConfigError, match="decode.amp: 'fp8' is not one of"):
        load_config(None, ["decode.amp=fp8"])


def test_cpu_training_attention_under_bf16_autocast_runs_in_float32_and_gradients_flow():
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8, generator=generator).bfloat16().requires_grad_() for _ in range(3))
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fused_attention(q, k, v, mask, 0.0, is_causal=False)
    expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)
    assert out.dtype is torch.bfloat16
    assert torch.equal(out, expected.bfloat16())  # not bf16 attention, which rounds its products differently
    out.float().pow(2).sum().backward()
    assert all(t.grad is not None and t.grad.dtype is torch.bfloat16 and t.grad.abs().sum() > 0 for t in (q, k, v))
    assert v.grad is not None and v.grad[1, :, 4:].abs().sum() == 0  # masked keys' values get no gradient
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):  # translation: bf16 attention as it was
        inference = fused_attention(q.detach(), k.detach(), v.detach(), mask, 0.0)
    assert torch.equal(inference, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).detach())
