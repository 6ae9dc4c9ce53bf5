"""A loaded run's linear layers holding each frozen weight in one layout at a time: plain, or oneDNN's packed
copy alone.

oneDNN multiplies a frozen weight in its own blocked layout, packed once (:func:`ordo.gemm.packed_weight`). Kept
beside the plain weight, that copy costs the model's linear weights twice over: at the base preset 184 MB, which
raised a beam search's peak memory to 1.26x BLAS's on an AMD EPYC with AVX-512, for 1.5x its speed
(``bench/results/decode_memory_amd_avx512_base.md``). A :class:`FrozenLinear` keeps the packed copy instead of
the plain weight wherever its products go to oneDNN's packed path by the setting alone (:func:`ordo.gemm.packs`:
``cpu_gemm onednn``, or auto's rule on such a CPU), and the plain weight otherwise: a product that needs it
(BLAS, bf16 autocast, gradients), a read of ``weight``, ``state_dict``, ``to`` restore it first. The packing is
exact both ways (``to_dense`` gives the weight back bit for bit), so the layer computes what a
:class:`ordo.gemm.Linear` of the same weight computes.

:func:`freeze_linear_layers` swaps a translation-only model's layers (``ordo.api.load_run``'s on a CPU): each
:class:`ordo.gemm.Linear` at least 256 wide whose weight no other module shares (a weight tied elsewhere stays
where it is read).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn

from ordo import gemm


class FrozenLinear(gemm.Linear):
    """y = x W^T + b with a frozen W held plain or, while its products run on oneDNN's packed path, packed alone
    (module docstring). An ``nn.Linear`` to its readers (hooks, ``isinstance``): ``weight`` and ``state_dict``
    give the plain W, and ``parameters()`` lists a placeholder of W's shape on the meta device while it is
    packed, so counts and shapes stay right."""

    def __init__(self, linear: nn.Linear) -> None:
        nn.Module.__init__(self)  # not nn.Linear's, which would draw a new weight
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self._parameters["weight"] = cast(nn.Parameter, linear.weight)
        self.bias = linear.bias
        self.packed: torch.Tensor | None = None  # W in oneDNN's layout, while it replaces the plain W

    @property
    def weight(self) -> torch.Tensor:  # type: ignore[override]
        """The plain W, restored from the packed copy where that is held."""
        self._restore()
        weight: nn.Parameter = self._parameters["weight"]  # type: ignore[assignment]
        return weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(…, in_features) -> (…, out_features): on the packed copy where :func:`ordo.gemm.packs` takes the
        product, else on the plain W by :func:`ordo.gemm.linear`."""
        placeholder: torch.Tensor = self._parameters["weight"]  # type: ignore[assignment]
        if gemm.packs(x, placeholder):
            if self.packed is None:
                self.packed = gemm.packed_weight(placeholder)
                self._parameters["weight"] = nn.Parameter(
                    torch.empty(placeholder.shape, device="meta"), requires_grad=placeholder.requires_grad)
            return gemm.packed_linear(x, self.packed, self.bias, self.out_features)
        return gemm.linear(x, self.weight, self.bias)

    def _restore(self) -> None:
        """Put the plain W back in place of the packed copy, if that is held."""
        if self.packed is not None:
            placeholder: torch.Tensor = self._parameters["weight"]  # type: ignore[assignment]
            self._parameters["weight"] = nn.Parameter(self.packed.to_dense(), requires_grad=placeholder.requires_grad)
            self.packed = None

    def train(self, mode: bool = True) -> FrozenLinear:
        """As ``nn.Module``'s; training mode restores the plain W first, so that an optimizer built after
        ``model.train()`` holds the weights themselves, not a placeholder."""
        if mode:
            self._restore()
        return super().train(mode)  # type: ignore[no-any-return]

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> FrozenLinear:
        """``to``, ``float`` and the like on the plain W (a meta placeholder cannot be moved)."""
        self._restore()
        return super()._apply(fn, recurse)  # type: ignore[no-any-return]

    def _save_to_state_dict(self, destination: dict[str, Any], prefix: str, keep_vars: bool) -> None:
        """The plain W and b, without giving up the packed copy."""
        if self.packed is None:
            super()._save_to_state_dict(destination, prefix, keep_vars)
            return
        destination[prefix + "weight"] = self.packed.to_dense()
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()

    def _load_from_state_dict(self, *args: Any, **kwargs: Any) -> None:
        """Load into the plain W (restored first)."""
        self._restore()
        super()._load_from_state_dict(*args, **kwargs)

    def extra_repr(self) -> str:
        """As ``nn.Linear``'s, and whether W is packed now."""
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"packed={self.packed is not None}")


def freeze_linear_layers(model: nn.Module) -> nn.Module:
    """``model`` with each :class:`ordo.gemm.Linear` that auto's oneDNN rule takes (:func:`ordo.gemm.wide_enough`)
    and whose weight appears once among its parameters replaced, in place, by a :class:`FrozenLinear` of the same
    parameters (module docstring); for translation only: the weights must not train. A narrower layer's weight is
    small, and its products (about 10 us at the tiny preset) would pay the swap's check, about 0.4 us each."""
    uses: dict[int, int] = {}
    for _, parameter in model.named_parameters(remove_duplicate=False):
        uses[id(parameter)] = uses.get(id(parameter), 0) + 1
    _swap(model, uses)
    return model


def _swap(module: nn.Module, uses: dict[int, int]) -> None:
    """Replace ``module``'s wide, unshared :class:`ordo.gemm.Linear` descendants by :class:`FrozenLinear`."""
    for name, child in list(module.named_children()):
        if type(child) is gemm.Linear and gemm.wide_enough(child.weight) and uses[id(child.weight)] == 1:
            setattr(module, name, FrozenLinear(child))
        else:
            _swap(child, uses)
