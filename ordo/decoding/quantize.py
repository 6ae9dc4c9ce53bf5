"""Dynamic int8 quantization of a trained model for translation on CPU (``ordo translate --int8``).

Every ``nn.Linear`` and the output projection keep their weights as int8, one scale per output row
(per-channel), and quantize their input activations per call; everything else (embeddings, attention
scores, layer norms, recurrent cells) stays in float32. On CPU this roughly halves the time of the
matrix products that dominate beam search; the outputs differ from float32 by the rounding of the
weights, so measure BLEU with and without it (``bench/RESULTS.md`` does for the recipes' models).

PyTorch marks ``torch.ao.quantization`` as deprecated in favour of torchao, whose int8 path is only fast
under ``torch.compile``; the eager fbgemm kernels used here still ship and work in the pinned torch, this
module is the only place that uses them, and a torch without them gives a clear error.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from ordo.errors import ConfigError
from ordo.gemm import Linear
from ordo.models.transformer import OutputProjection


def quantize_int8(model: nn.Module) -> nn.Module:
    """An int8 copy of ``model`` for CPU inference; ``model`` itself is left unchanged.

    The output projection H W_o^T (tied to the target embeddings or not) becomes a bias-free linear
    layer holding a copy of W_o, so it is quantized like the other projections while the embedding
    lookup keeps the float weights.

    Raises:
        ConfigError: if the model's parameters are not on the CPU (int8 kernels are CPU-only here; use
            bf16 on CUDA), or if this torch no longer ships ``torch.ao.quantization``.
    """
    try:
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    except ImportError as err:
        raise ConfigError(f"int8 translation needs torch.ao.quantization, which torch {torch.__version__} "
                          f"lacks ({err}); translate without --int8") from None
    device = next(model.parameters()).device
    if device.type != "cpu":
        raise ConfigError(f"int8 translation runs on the CPU only; the model is on {device} (use bf16 on CUDA)")
    quantized = copy.deepcopy(model).eval()
    _plain_linear_layers(quantized)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*deprecated", category=UserWarning)
        warnings.filterwarnings("ignore", message=r".*quantize_per_channel.*deprecated", category=UserWarning)
        warnings.filterwarnings("ignore", message=r"torch\.ao\.quantization is deprecated", category=DeprecationWarning)
        return quantize_dynamic(quantized, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True)


def is_int8(model: nn.Module) -> bool:
    """Whether ``model`` holds dynamically quantized int8 layers (as :func:`quantize_int8` returns it)."""
    return any(type(module).__module__.startswith("torch.ao.nn.quantized") for module in model.modules())


def _plain_linear_layers(model: nn.Module) -> None:
    """Replace each :class:`OutputProjection` in ``model`` by an ``nn.Linear`` holding a copy of its weight, and
    each :class:`ordo.gemm.Linear` by an ``nn.Linear`` holding its parameters (the int8 swap takes that exact type)."""
    for name, child in list(model.named_children()):
        if isinstance(child, OutputProjection):
            vocab_size, dim = child.weight.shape
            linear = nn.Linear(dim, vocab_size, bias=False)
            linear.weight = nn.Parameter(child.weight.detach().clone(), requires_grad=False)
            setattr(model, name, linear)
        elif isinstance(child, Linear):
            plain = nn.Linear(child.in_features, child.out_features, bias=child.bias is not None)
            plain.weight, plain.bias = child.weight, child.bias
            setattr(model, name, plain)
        else:
            _plain_linear_layers(child)
