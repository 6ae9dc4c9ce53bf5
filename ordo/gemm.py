"""Where the float32 matrix products of linear layers run on CPU: torch's BLAS (MKL on x86) or oneDNN.

torch sends a float32 ``F.linear`` on CPU to its BLAS. On AMD CPUs MKL takes its generic code path, so a core
with AVX-512 multiplies at AVX2 speed, while oneDNN (which torch ships, and which bf16 autocast already uses)
runs its own kernels for the CPU at hand. This module routes the linear layers' products (``y = x W^T + b``,
the layers of :class:`Linear` and the output projection) through oneDNN when a ``cpu_gemm`` setting asks for
it:

- ``blas``: torch's default path, everywhere;
- ``onednn``: oneDNN for float32 tensors on CPU outside autocast (anything else keeps torch's path);
- ``auto``: in training, a rule on the CPU (:func:`onednn_wins`); in decoding, the faster of the two for each
  product shape, timed on the machine at hand (:class:`KeyTiming`).

Training (``auto``): oneDNN on x86 CPUs not made by Intel that have AVX-512, for the products of weights whose
sides are both at least :data:`AUTO_MIN_WIDTH` (256); BLAS elsewhere. There MKL's generic path runs AVX2 code
where oneDNN runs AVX-512 code, and on an AMD EPYC with AVX-512 (Zen 5) oneDNN trained the small and base presets
(256- and 512-wide layers) 1.39x and 1.59x as fast as BLAS, but the tiny one (64-wide, its FFN 256) at 0.88x with
1.6x the memory: a narrow product is too small for oneDNN's kernels to pay their cost. On an AMD CPU without
AVX-512 that generic path is the CPU's best code, and oneDNN trains slower with more memory; on an Intel CPU MKL
runs its own best code. The figures per CPU kind are in ``bench/results/cpu_defaults.md`` (AVX2),
``bench/results/cpu_defaults_amd_avx512.md`` and ``bench/results/cpu_gemm.md``. A rule on the CPU's vendor and
flags and the weight's shape, not a timing: every process of a run (and a resumed run, and its validation's
translations) on the same kind of CPU takes the same backend for each layer, so the run's results do not depend
on how busy the machine was. oneDNN builds and keeps a kernel for each shape it meets, and token batching brings
a new row count nearly every batch, so a training product on oneDNN pads its rows as bf16 training does (below),
keeping the unpadded input for its backward pass: a base model's 6 updates held 2.92 GB, 0.47 GB less than
with the padded input kept (BLAS 2.80 GB; 108a517). The output layer's chunked loss pads its rows on oneDNN too (:func:`pads_training_rows`):
unpadded, its weight gradient (a reduction over the chunk's rows) met a new row count every batch, and a small
model's peak memory grew from 1.22 GB after 12 updates to 1.66 GB after 100 (BLAS 1.02 GB; 1.27 GB padded).

Decoding (``auto`` in a :func:`cpu_gemm` block opened with ``timed=True`` that no training block encloses, as ``ordo
translate``, ``ordo serve`` and the API's translate open it): which backend is faster for a product depends on its
shape and row count in a way no rule on the CPU's flags captures. oneDNN's packed weights win for a few rows of a
wide layer (the output projection of a beam's rows most of all) and lose to BLAS by a fixed overhead per call on
narrow layers and single rows. So each key (weight shape, row count up to :data:`SMALL_ROW_BUCKET`: a beam's rows)
is timed on its own products (:class:`KeyTiming`): on the rule's backend until they have taken
:data:`TIMING_AFTER_S` (a key used a few times would not pay its timing back), and, where the trial would pack
weights for oneDNN, :data:`PACK_PAYBACK` times that packing's time, then a few on the other backend, all
the key's layers at once (a product is slower right after one of the other backend, so a trial judges each backend
beside its own products), and the faster per row is kept for the rest of the process: the rule's backend unless
the other is faster by :data:`TIMING_MARGIN`; a key the rule's backend kept is tried once more after
:data:`RETRY_AFTER_S`, beside the backends its neighbours in the step chose. No product runs twice, so the timing
costs the slower backend's few products, and oneDNN's kernel for the shape; a key whose products BLAS finishes
faster than oneDNN can run any product (:func:`onednn_floor`) keeps BLAS untried. A key that chose BLAS drops the
packed weights its trials made. Products of more rows (a file's batch of beams) keep the rule's backend untimed:
there the two backends were level or BLAS ahead where the rule is BLAS (``bench/results/cpu_defaults.md``), while
a oneDNN choice builds a kernel for each row count the batch meets as its sentences finish, and the timing of those
many rarely repeated counts cost more than it could win (auto trailed BLAS by 6-16% on a whole file). One key per
shape for all those counts, judged per row, was tried too: it sped a base model's 40-sentence file by 8-11% (its
output projection on oneDNN), but its trials compared an encoder's products (a batch's source tokens, about 600
rows) with a decoder's (200), which chose differently from process to process, and a oneDNN choice there raised a
small model's peak memory by 30-40 MB, 8-10% above BLAS's. Once a key is decided, a product of its shape and row
count finds its backend by one lookup (:func:`linear`): a decoding step of the tiny preset is a few dozen products
of about 10 us each, so the checks and the key of a product must cost little beside them. A block opened under CPU
autocast keeps the rule (its products run in the autocast dtype). The translations of two processes can then
differ where float32 rounding decides a near tie, as they can between ``blas`` and ``onednn``; set
``decode.cpu_gemm`` to either for bit-identical translations across processes.

The two paths compute the same products with a different order of additions, so results agree to float32
rounding (about 1e-6 relative), not bit for bit; each path is deterministic for a given shape and thread count.
The backward pass of a oneDNN product uses oneDNN too (:class:`_OneDnnLinear`); without gradients (translation,
validation) the weights are packed once into oneDNN's layout (:func:`packed_weight`), and a loaded run's wide layers
keep that copy in place of their own (:mod:`ordo.decoding.packed`, where :func:`packs` says the setting takes it).

Training under bf16 autocast on a CPU, torch runs every product on oneDNN, which builds (and caches) a kernel for
each new shape; with token batching nearly every batch brings a new number of rows, so the caches grow with
every update and the steps slow down as they do (bench/RESULTS.md). There, and for float32 training products on
oneDNN, the rows of each product are padded with zeros to a few counts (:func:`bucketed_rows`: multiples of
:data:`SMALL_ROW_BUCKET` up to :data:`ROW_BUCKET` rows, then 8 counts per doubling, at least ROW_BUCKET apart),
which bounds the shapes, keeps the memory flat and the step time steady; the padded rows are cut off again. Each
kernel, about 0.5 MB, stays in two caches (oneDNN's and torch's, 1,024 entries each); a run builds most of them
in its first batches and its validation: multiples of 128 throughout gave a tiny model's bf16 run about 220
kernels and 1.18x the peak memory of float32 BLAS over 600 updates, the 8 counts per doubling 110 kernels and
1.03x over 200, at the same speed, and 6-10% less memory for the small and base presets, bf16 and float32 on
oneDNN (bench/RESULTS.md, "CPU defaults per preset"). bf16 products without gradients (a validation's, a bf16
translation's) pad their rows as oneDNN's float32 ones do (:func:`inference_rows`). A bf16 product keeps its
input for the backward pass unpadded, in bf16 (:class:`_Bf16Linear`), not the padded copy autocast's product
would keep.
"""

from __future__ import annotations

import contextlib
import functools
import platform
import statistics
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.weak import WeakIdKeyDictionary

from ordo.errors import ConfigError

_active: str = "blas"  # the resolved backend inside the innermost :func:`cpu_gemm` context
_auto_rule: bool = False  # whether that block's oneDNN is auto's rule, which keeps narrow weights on BLAS
_timed: bool = False  # whether that block chooses per product by timing (module docstring)
# (out features, in features, rows, threads) -> the faster backend, timed once per process
_choices: dict[tuple[int, int, int, int], str] = {}
_floors: dict[int, float] = {}  # threads -> oneDNN's least seconds per product (onednn_floor)
_pack_rates: dict[int, float] = {}  # threads -> seconds oneDNN's packing takes per weight element (pack_rate)
_timings: dict[tuple[int, int, int, int], KeyTiming] = {}  # the keys still being timed
# the decided backends again, by (weight shape, exact row count), for each thread count: the lookup of
# :func:`linear`'s fast path in a timed block (a decoding step's products find their backend by one dict lookup)
_decided_by_threads: dict[int, dict[tuple[torch.Size, int], str | KeyTiming]] = {}
# the timed block's thread count's entry of the above; a key waiting for its trial untimed has its timing there
_decided: dict[tuple[torch.Size, int], str | KeyTiming] = {}
_packed_weights: WeakIdKeyDictionary | None = None  # trained weight -> packed copy, for the outermost block's life
# frozen weights: id(weight) -> (a weak reference to it, its version, packed copy); a plain dict, as a lookup
# happens for every product of a decoding step, and the reference's callback drops the entry with the weight
_packed_frozen: dict[int, tuple[weakref.ref, int | None, torch.Tensor]] = {}
PACK_ROWS = 8  # the row count oneDNN is told to expect when packing (the layout it picks serves any count)
ROW_BUCKET = 128  # training products (bf16, or float32 on oneDNN) see row counts that are multiples of this
SMALL_ROW_BUCKET = 16  # ... or, up to ROW_BUCKET rows (an RNN's time step), multiples of this
AUTO_MIN_WIDTH = 256  # auto's oneDNN rule keeps a weight with a side narrower than this on BLAS (module docstring)
TIMING_MARGIN = 0.05  # a timed choice leaves the rule's backend only for one faster by this share
TRIAL_RUNS = 3  # timed products of a key on the other backend that decide it (KeyTiming)
RULE_RUNS = 8  # the rule's latest timed products of a key that a choice judges it on (KeyTiming)
FLOOR_RUNS = 5  # timed products of onednn_floor's, after one untimed
TIMING_AFTER_S = 0.002  # a key is tried on the other backend once its products have taken this long on the rule's
RETRY_AFTER_S = 0.02  # ... and, where the rule's kept it, tried once more after this long (KeyTiming.retry)
RETRY_WITHIN = 1.5  # ... where the other's took at most this many times the rule's time (a close call)
PACK_PAYBACK = 20  # ... and a trial that packs weights, not before they have taken this many times the packing
PACK_SIDE = 256  # pack_rate packs a weight of this many rows and columns


@functools.cache
def onednn_available() -> bool:
    """Whether this torch can run float32 linear layers through oneDNN (``torch.ops.mkldnn._linear_pointwise``,
    the kernel torch's own compiler uses for CPU linear layers)."""
    ops = torch.ops.mkldnn
    return torch.backends.mkldnn.is_available() and all(
        hasattr(ops, name) for name in ("_linear_pointwise", "_reorder_linear_weight"))


@functools.cache
def cpuinfo() -> dict[str, str]:
    """The fields of the first processor in ``/proc/cpuinfo`` (``vendor_id``, ``model name``, ``flags``, ...),
    empty where it cannot be read (not Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    first = text.split("\n\n", 1)[0]
    return {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in first.splitlines())}


def cpu_vendor() -> str:
    """The CPU's vendor id (``GenuineIntel``, ``AuthenticAMD``, ...), or an empty string where it is unknown."""
    return cpuinfo().get("vendor_id", "")


def cpu_flags() -> set[str]:
    """The CPU's feature flags (``avx2``, ``avx512f``, ...), empty where they are unknown."""
    return set(cpuinfo().get("flags", "").split())


def onednn_wins() -> bool:
    """Whether ``auto`` trains on oneDNN on this CPU (module docstring; the layers :func:`wide_enough` only): on
    an x86 CPU not made by Intel, where MKL runs its generic AVX2 code, with AVX-512, which oneDNN uses and that
    path does not."""
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    return x86 and cpu_vendor() not in ("", "GenuineIntel") and "avx512f" in cpu_flags()


def auto_reason() -> str:
    """Why ``auto`` takes the backend it takes on this CPU in training, in words (decoding times each shape)."""
    if not onednn_available():
        return "this torch has no oneDNN linear kernel"
    vendor = cpu_vendor() or "an unknown vendor"
    if "avx512f" not in cpu_flags():
        return f"{platform.machine()} CPU by {vendor}, without AVX-512"
    narrow = f"; layers narrower than {AUTO_MIN_WIDTH} on BLAS" if onednn_wins() else ""
    return f"{platform.machine()} CPU by {vendor}, with AVX-512{narrow}"


def resolve(backend: str) -> str:
    """``blas`` or ``onednn`` for a ``cpu_gemm`` setting, ``auto`` by the training rule (module docstring).

    Raises:
        ConfigError: ``onednn`` asked for where this torch cannot run it.
    """
    if backend == "onednn" and not onednn_available():
        raise ConfigError("cpu_gemm onednn: this torch has no oneDNN linear kernel (use auto or blas)")
    if backend == "auto":
        return "onednn" if onednn_available() and onednn_wins() else "blas"
    return backend


@contextlib.contextmanager
def cpu_gemm(backend: str, timed: bool = False) -> Iterator[str]:
    """Run the linear layers' CPU products inside the block on ``backend`` (``auto``/``onednn``/``blas``);
    yields the resolved name: ``blas``, ``onednn`` or, for a timed ``auto``, ``timed``. The setting is the
    process's: one training or translation at a time.

    ``timed`` (decoding): ``auto`` picks the faster backend per product shape by timing both
    (:class:`KeyTiming`), unless an enclosing block is not timed (a training run's validation keeps the
    training rule, so that a run and its resumption pick alike). Products that need gradients keep the rule.

    A weight being trained that was packed for oneDNN is kept until the outermost block ends (:func:`packed_weight`), so
    it may not change inside a block: the trainer enters one per forward pass and steps its optimizer outside."""
    global _active, _auto_rule, _timed, _packed_weights, _decided
    previous = _active, _auto_rule, _timed, _packed_weights, _decided
    outermost = _packed_weights is None
    _active = resolve(backend)
    _auto_rule = backend == "auto" and _active == "onednn"
    _timed = (timed and backend == "auto" and onednn_available() and (outermost or _timed)
              and not torch.is_autocast_enabled("cpu"))
    if _timed:
        _decided = _decided_by_threads.setdefault(torch.get_num_threads(), {})
    if _packed_weights is None:
        _packed_weights = WeakIdKeyDictionary()
    try:
        yield "timed" if _timed else _active
    finally:
        _active, _auto_rule, _timed, _packed_weights, _decided = previous


def _onednn_can_run(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether oneDNN can take a product of ``a`` and ``b``: float32 on CPU, outside CPU autocast (a bias follows
    its weight: F.linear refuses a mismatch either way)."""
    return (a.is_cpu and b.is_cpu and a.dtype == torch.float32 and b.dtype == torch.float32
            and not torch.is_autocast_enabled("cpu"))


def _use_onednn(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a product of ``a`` and ``b`` (a weight, or a product's second factor) goes to oneDNN: asked for (by
    auto's rule only where ``b`` is :func:`wide_enough`), and one it can run. Called for every product: kept
    cheap."""
    return _active == "onednn" and (not _auto_rule or wide_enough(b)) and _onednn_can_run(a, b)


def wide_enough(weight: torch.Tensor) -> bool:
    """Whether auto's oneDNN rule takes a product with the 2-D ``weight``: both its sides at least
    :data:`AUTO_MIN_WIDTH` (module docstring: oneDNN trains a model of 64-wide layers slower than BLAS, with more
    memory, where it trains 256- and 512-wide ones 1.4-1.6x faster)."""
    return weight.size(0) >= AUTO_MIN_WIDTH and weight.size(1) >= AUTO_MIN_WIDTH


def auto_backend(weight: torch.Tensor) -> str:
    """The backend ``auto``'s rule gives a product with ``weight`` on this CPU: in training, and in decoding above
    a beam's rows (module docstring)."""
    return "onednn" if resolve("auto") == "onednn" and wide_enough(weight) else "blas"



def _needs_grad(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Whether the product x W^T + b records gradients."""
    return torch.is_grad_enabled() and (
        x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad))


def _timeable(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Whether a product in a timed block is chosen by timing: one that oneDNN can run and that needs no
    gradient."""
    return not _needs_grad(x, weight, bias) and _onednn_can_run(x, weight)


def _onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x W^T + b by oneDNN, no autograd; ``weight`` dense or packed by :func:`packed_weight`."""
    dense_weight = weight if weight.is_mkldnn else weight.contiguous()
    return torch.ops.mkldnn._linear_pointwise(x.contiguous(), dense_weight, bias, "none", [], "")


def _onednn_inference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x W^T + b by oneDNN on ``weight``'s packed copy, with the rows padded by zero rows to
    :func:`inference_rows` and cut back after: oneDNN builds and keeps a kernel for each row count it meets, and
    a new one costs 3 to 9 times a repeated product of the small preset's layers and about 0.5 MB that stays
    (``bench/results/gemm_decode_costs.md``), while a decoding run's row count changes whenever a sentence of
    the batch finishes; padded, a weight meets a few row counts for at most 1/8 more rows above 128."""
    return packed_linear(x, packed_weight(weight), bias, weight.size(0))


def packed_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, out_features: int) -> torch.Tensor:
    """x W^T + b by oneDNN without gradients on ``packed``, W's copy from :func:`packed_weight`, the rows padded as
    :func:`_onednn_inference` pads them."""
    return _inference_product(x, out_features, lambda rows: _onednn_linear(rows, packed, bias))


def packs(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether :func:`linear` runs the product of ``x`` by the frozen ``weight`` (its shape and dtype: a placeholder
    on the meta device will do) on the packed copy by the setting alone, untimed: ``onednn``, or auto's rule where
    ``weight`` is :func:`wide_enough`; float32 on a CPU outside autocast, without gradients. A loaded run's layers
    then hold that copy alone (:mod:`ordo.decoding.packed`)."""
    return (_active == "onednn" and (not _auto_rule or wide_enough(weight)) and x.is_cpu
            and x.dtype == torch.float32 and weight.dtype == torch.float32 and not torch.is_autocast_enabled("cpu")
            and not _needs_grad(x, weight, None))


def _inference_product(x: torch.Tensor, out_features: int, product: Callable[[torch.Tensor], torch.Tensor]
                       ) -> torch.Tensor:
    """``product`` of ``x`` without gradients, its rows padded to :func:`inference_rows` (:func:`_padded_product`):
    oneDNN's float32 products on the packed weight, and bf16 products (module docstring)."""
    return _padded_product(x, inference_rows(x.numel() // max(x.size(-1), 1)), out_features, product)


def _padded_product(
    x: torch.Tensor, padded_rows: int, out_features: int, product: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    """``product`` of ``x``'s rows padded by zero rows to ``padded_rows``, the padded rows cut off again; the
    product of ``x`` itself where no padding is needed."""
    rows = x.reshape(-1, x.size(-1))
    padding = padded_rows - rows.size(0)
    if padding == 0:
        return product(x)
    return product(F.pad(rows, (0, 0, 0, padding)))[: rows.size(0)].view(*x.shape[:-1], out_features)


def inference_rows(rows: int) -> int:
    """The row count a oneDNN product without gradients runs at (:func:`_onednn_inference`, and bf16 products
    without gradients): up to :data:`SMALL_ROW_BUCKET` rows (a beam of one sentence) as they are, since there are
    few such counts and padding would multiply the work of the few rows where oneDNN wins most; above,
    :func:`_grid_rows` with steps of at least SMALL_ROW_BUCKET (15 counts up to 256 rows, then 8 per doubling)."""
    if rows <= SMALL_ROW_BUCKET:
        return rows
    return _grid_rows(rows, SMALL_ROW_BUCKET)


def _grid_rows(rows: int, least_step: int) -> int:
    """``rows`` rounded up to a multiple of a sixteenth of the power of two at or above it, or of ``least_step``
    where that is larger: 8 counts per doubling, at most 1/8 more rows than ``rows`` once the sixteenth is the
    step."""
    step = max(least_step, (1 << (rows - 1).bit_length()) // 16)
    return -(-rows // step) * step


def packed_weight(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` (M, K) in oneDNN's blocked layout: without packing, oneDNN reorders the weight on every call,
    which for the few rows of a decoding step costs about as much as the product itself, while packing a whole
    model costs about as much as a few decoding steps (``bench/results/cpu_defaults.md``).

    A weight being trained (``requires_grad``) is packed once per outermost :func:`cpu_gemm` block, as its
    optimizer may change it without a trace between blocks (torch's fused Adam bumps no version counter). A
    frozen weight (a loaded run's) is packed once and kept while its version counter stands: an optimizer
    skips it, and an in-place change bumps the counter."""
    if not weight.requires_grad:
        version = None if weight.is_inference() else weight._version
        key = id(weight)
        entry = _packed_frozen.get(key)
        if entry is None or entry[0]() is not weight or entry[1] != version:
            entry = (weakref.ref(weight, lambda _: _packed_frozen.pop(key, None)), version, _pack(weight))
            _packed_frozen[key] = entry
        return entry[2]
    if _packed_weights is None:
        return _pack(weight)
    packed = _packed_weights.get(weight)
    if packed is None:
        packed = _packed_weights[weight] = _pack(weight)
    return packed


def _pack(weight: torch.Tensor) -> torch.Tensor:
    """A copy of ``weight`` in oneDNN's blocked layout."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), PACK_ROWS)


def _drop_packed(weight: torch.Tensor) -> None:
    """Forget ``weight``'s packed copy, if it has one."""
    if _packed_weights is not None:
        _packed_weights.pop(weight, None)
    entry = _packed_frozen.get(id(weight))
    if entry is not None and entry[0]() is weight:
        del _packed_frozen[id(weight)]


def _has_packed(weight: torch.Tensor) -> bool:
    """Whether ``weight`` has a packed copy now."""
    entry = _packed_frozen.get(id(weight))
    return (entry is not None and entry[0]() is weight) or (_packed_weights is not None and weight in _packed_weights)


def pick(blas_seconds: float, onednn_seconds: float, preferred: str) -> str:
    """The backend a timed choice keeps: ``preferred`` (the rule's) unless the other took less by more than
    :data:`TIMING_MARGIN` of its time."""
    if preferred == "onednn":
        return "blas" if blas_seconds < onednn_seconds * (1 - TIMING_MARGIN) else "onednn"
    return "onednn" if onednn_seconds < blas_seconds * (1 - TIMING_MARGIN) else "blas"


def onednn_floor() -> float:
    """Seconds of oneDNN's fastest product of one row by a 16 x 16 packed weight on this process's threads,
    measured once per thread count: its cost per call, below which no product of oneDNN's can come (about
    40 us on the AMD EPYC of ``bench/results/cpu_defaults.md``, where torch's BLAS takes 5-15 us for the tiny
    preset's products of a beam)."""
    threads = torch.get_num_threads()
    if threads not in _floors:
        x, packed = torch.ones(1, 16), _pack(torch.ones(16, 16))
        _onednn_linear(x, packed, None)
        _floors[threads] = min(_seconds(lambda: _onednn_linear(x, packed, None)) for _ in range(FLOOR_RUNS))
    return _floors[threads]


def pack_rate() -> float:
    """Seconds oneDNN's packing (:func:`_pack`) takes per weight element on this process's threads, measured once
    per thread count: the least of :data:`FLOOR_RUNS` packings of a :data:`PACK_SIDE`-square weight after one
    untimed, each copy kept until the last, so that each is written to new memory as a trial's packed copies are.
    Packed again into the memory just freed, the same weight took 0.55 ns per element on the Intel Xeon (AMX) of
    ``bench/results/cpu_defaults_intel_amx_167.md``, where a small model's trials packed its weights at 1.3-3.6 ns
    (the new memory's first writes), so the estimate let the trials pack 3-6 times too soon."""
    threads = torch.get_num_threads()
    if threads not in _pack_rates:
        weight = torch.ones(PACK_SIDE, PACK_SIDE)
        _pack(weight)
        copies: list[torch.Tensor] = []
        _pack_rates[threads] = min(_seconds(lambda: copies.append(_pack(weight))) for _ in range(FLOOR_RUNS)
                                   ) / weight.numel()
    return _pack_rates[threads]


def _seconds(call: Callable[[], object]) -> float:
    """Wall seconds one call of ``call`` takes."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


@dataclass
class KeyTiming:
    """The timing of one key (weight shape, rows, threads) in decoding, on its real products: first on the rule's
    backend (``rule``) until they have taken :data:`TIMING_AFTER_S` over at least :data:`TRIAL_RUNS` timed
    products, then on the other backend, every weight of the key (the layers of its shape), until :data:`TRIAL_RUNS`
    of its products are timed (:meth:`record`: not its first, nor one that packed a weight); then :func:`pick`
    decides on each backend's median seconds per row: the other's over its trial, the rule's over its latest
    :data:`RULE_RUNS` products before it. A median, not the least time: the least of the rule's many products is
    its luckiest, against the other's few (in one translation a base model's (512 x 512) layers at 5 rows took
    190-460 us on BLAS, 175 us at least, and about 175 us on oneDNN; the least kept BLAS, which averaged 217 us
    against oneDNN's 174 us over the translation), while one slow product (the machine busy for a moment) moves no
    median. No product is run twice for the timing, so it costs only the other backend's few products where it is
    the slower, and oneDNN's packing and kernel for the shape; a trial that BLAS wins lets its packed copies go.

    A product runs slower right after one of the other backend: on the AMD EPYC (AVX2), a (5 x 512) by
    (512 x 512) oneDNN product took 118-130 us after a (5 x 512) by (512 x 2048) oneDNN product and 159-174 us after
    the same product on BLAS. So the trial moves the whole key: a trial on one of its weights, the others still on
    the rule's, judged oneDNN beside BLAS products of its own shape, and kept a base model's (512 x 512) layers at
    5 rows on BLAS in 3 of 5 processes (the three layers of a decoder layer take turns), where they took 215 us a
    product against oneDNN's 161 over a translation (``bench/results/cpu_defaults.md``). And a key that keeps the
    rule's backend is tried once more (:meth:`retry`), after its products have taken :data:`RETRY_AFTER_S` more: a
    first trial runs while most keys still run the rule's backend, beside products it will not run beside once the
    keys around it have chosen; the second runs beside the products the choice will run beside. Only a close call
    is tried again: where the other backend took more than :data:`RETRY_WITHIN` times the rule's per row, more than
    its neighbours could turn (the 1.35x above), the first trial decides (a small model's layers at 5 rows on the
    Intel Xeon (AMX): oneDNN 3.3-4.6x BLAS's time for three of its five keys).

    A trial on oneDNN packs each weight of the key that has no packed copy yet (:meth:`see` counts them), which
    for a short job costs more than the trial can win: on the Intel Xeon (AMX) of
    ``bench/results/cpu_defaults_intel_amx.md``, where BLAS wins all but the output projection's products of a
    beam, trials after 2 ms packed every weight of the model (36 ms for the small preset, 109 ms for the base) and
    a fresh process's 8 sentences one at a time ran at 0.80 (0.69-0.91) of BLAS's speed at the small preset. So
    such a trial waits until the key's products have taken :data:`PACK_PAYBACK` times the packing's estimate
    (:func:`pack_rate`): the packing then costs at most a twentieth of the key's time.

    While a key waits for its trial, timing each of its products costs more than the timing needs: the bookkeeping
    of a timed product, about 6 us on the Intel Xeon (AMX) of ``bench/results/cpu_defaults_intel_amx_167.md``,
    beside a small model's products of a beam at 10-40 us, and a small model's decoder keys wait for hundreds of
    products (PACK_PAYBACK, then :data:`RETRY_AFTER_S`): a fresh process translating 8 sentences one at a time ran at
    0.86 (0.76-0.98) of BLAS's speed there at the small preset, where auto kept BLAS for every key. So once the rule's
    timed products give a median, the products that would fill the wait but for its last :data:`RULE_RUNS` run
    untimed (:attr:`untimed`, their time counted at that median) by :func:`linear`'s lookup, and the trial judges
    the rule's backend on the timed products just before it."""

    rule: str
    spent: float = 0.0  # seconds the key's products have taken on the rule's backend
    rule_per_row: deque[float] = field(default_factory=lambda: deque(maxlen=RULE_RUNS))  # its latest, s per row
    trial_products: int = 0  # products run on the other backend so far ...
    other_per_row: list[float] = field(default_factory=list)  # ... its timed ones, s per row (not the first)
    packed: list[weakref.ref] = field(default_factory=list)  # weights its oneDNN products packed first
    retried: bool = False  # whether this is the key's second trial (retry)
    seen: set[int] = field(default_factory=set)  # ids of the key's weights its rule's products ran (see)
    unpacked_elements: int = 0  # elements of those weights that had no packed copy when first seen
    untimed: int = 0  # the key's next products that run on the rule's backend untimed (class docstring)

    @property
    def other(self) -> str:
        """The backend the rule's is timed against."""
        return "blas" if self.rule == "onednn" else "onednn"

    def backend(self) -> str:
        """The backend the key's next product runs on: the rule's until the trial is due (class docstring), then
        the other's for every weight of the key until the trial is over."""
        due = len(self.rule_per_row) >= TRIAL_RUNS and self.spent >= self.after()
        return self.other if self.trial_products or due else self.rule

    def record(self, backend: str, seconds: float, rows: int, packed: bool) -> str | None:
        """Count a product of ``rows`` rows that took ``seconds`` on ``backend`` (``packed``: it packed its
        weight for oneDNN first, so its time is not the product's: the layers of one shape are one key, and each
        weight is packed at its first oneDNN product); the key's choice once it is made (class docstring); BLAS
        at once where the rule is BLAS and a product of the key took less than :func:`onednn_floor` (one fast
        product is proof enough: most of a small model's keys are decided at their first product, and the
        timing's bookkeeping stops there)."""
        if backend == self.rule:
            if packed:
                return None
            if self.rule == "blas" and seconds < onednn_floor():
                return "blas"
            self.spent += seconds
            self.rule_per_row.append(seconds / rows)
            self.untimed = self.untimed_products(rows)
            return None
        self.trial_products += 1
        if packed or self.trial_products == 1:
            return None
        self.other_per_row.append(seconds / rows)
        if len(self.other_per_row) < TRIAL_RUNS:
            return None
        per_row = {self.rule: statistics.median(self.rule_per_row), self.other: statistics.median(self.other_per_row)}
        choice = pick(per_row["blas"], per_row["onednn"], self.rule)
        if choice == self.rule and not self.retried and per_row[self.other] <= RETRY_WITHIN * per_row[self.rule]:
            self.retry()
            return None
        return choice

    def untimed_products(self, rows: int) -> int:
        """How many of the key's next products of ``rows`` rows run untimed on the rule's backend (class
        docstring): those that would fill its wait for the trial, at the median of its timed products so far, but
        for the last :data:`RULE_RUNS`; their estimated time is counted as spent."""
        if len(self.rule_per_row) < TRIAL_RUNS:
            return 0
        product = statistics.median(self.rule_per_row) * rows
        untimed = int((self.after() - self.spent) / product) - RULE_RUNS
        if untimed <= 0:
            return 0
        self.spent += untimed * product
        return untimed

    def untimed_product(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """x W^T + b, one of the key's products while it waits untimed (:attr:`untimed`), on the rule's backend;
        ``weight`` counted among those its trial would pack (:meth:`see`)."""
        self.untimed -= 1
        self.see(weight)
        return _product(self.rule, x, weight, bias)

    def see(self, weight: torch.Tensor) -> None:
        """Count ``weight``, a layer of the key that a product on the rule's backend ran, among those the trial
        would pack: where the rule is BLAS (a trial on oneDNN), once, and only where it has no packed copy yet."""
        if self.rule == "blas" and id(weight) not in self.seen:
            self.seen.add(id(weight))
            if not _has_packed(weight):
                self.unpacked_elements += weight.numel()

    def after(self) -> float:
        """Seconds the key's products take on the rule's backend before its trial: :data:`TIMING_AFTER_S`, or
        :data:`PACK_PAYBACK` times the packing of the weights the trial would pack where that is longer (class
        docstring); :data:`RETRY_AFTER_S` before its second."""
        if self.retried:
            return RETRY_AFTER_S
        packing = self.unpacked_elements * pack_rate() if self.unpacked_elements else 0.0
        return max(TIMING_AFTER_S, PACK_PAYBACK * packing)

    def retry(self) -> None:
        """Start the key's timing over for its second trial (class docstring); the weights its first packed stay
        packed."""
        self.spent, self.trial_products, self.retried = 0.0, 0, True
        self.rule_per_row.clear()
        self.other_per_row.clear()


def _product(backend: str, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x W^T + b without gradients on ``backend``."""
    return _onednn_inference(x, weight, bias) if backend == "onednn" else F.linear(x, weight, bias)


def _timed_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, rows: int) -> torch.Tensor:
    """x W^T + b (``rows`` rows, at most :data:`SMALL_ROW_BUCKET`) on the backend chosen for its key (weight
    shape, rows, threads), which its products time until the choice is made (:class:`KeyTiming`); a weight packed
    only for the timing is let go if BLAS wins. A decided key's backend is kept for :func:`linear`'s fast path, as is
    a waiting key's timing while its products run untimed (:class:`KeyTiming`)."""
    key = (weight.size(0), weight.size(1), rows, torch.get_num_threads())
    choice = _choices.get(key)
    if choice is not None:
        _decided[weight.shape, rows] = choice
        return _product(choice, x, weight, bias)
    timing = _timings.get(key)
    if timing is None:
        timing = _timings[key] = KeyTiming("onednn" if _use_onednn(x, weight) else "blas")  # the rule's
    backend = timing.backend()
    if backend == timing.rule:
        timing.see(weight)
    packing = backend == "onednn" and not _has_packed(weight)
    if packing:
        timing.packed.append(weakref.ref(weight))
    start = time.perf_counter()
    y = _product(backend, x, weight, bias)
    choice = timing.record(backend, time.perf_counter() - start, rows, packing)
    if choice is not None:
        _choices[key] = _decided[weight.shape, rows] = choice
        del _timings[key]
        for packed in timing.packed if choice == "blas" else []:
            if (released := packed()) is not None:
                _drop_packed(released)
    elif timing.untimed:
        _decided[weight.shape, rows] = timing  # linear's lookup runs its untimed products
    return y


class _OneDnnLinear(torch.autograd.Function):
    """y = x W^T + b with its gradients dx = dy W, dW = dy^T x, db = Σ dy, every product by oneDNN on rows padded
    by zero rows to :func:`bucketed_rows` (module docstring), the unpadded x saved for the backward pass."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        """(…, K) x, (M, K) W, (M,) b or None -> (…, M)."""
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None  # type: ignore[attr-defined]
        padded_rows = bucketed_rows(x.numel() // max(x.size(-1), 1))
        return _padded_product(x, padded_rows, weight.size(0), lambda rows: _onednn_linear(rows, weight, bias))

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad_y: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """Gradients of x, W and b for the incoming (…, M) gradient of y."""
        x, weight = ctx.saved_tensors  # type: ignore[attr-defined]
        grad_rows = grad_y.reshape(-1, grad_y.size(-1))
        x_rows = x.reshape(-1, x.size(-1))
        rows = x_rows.size(0)
        padding = bucketed_rows(rows) - rows
        padded_grad = F.pad(grad_rows, (0, 0, 0, padding)) if padding else grad_rows
        need_x, need_weight, need_bias = ctx.needs_input_grad  # type: ignore[attr-defined]
        grad_x = _onednn_linear(padded_grad, weight.t(), None)[:rows].view(x.shape) if need_x else None
        grad_weight = None
        if need_weight:
            padded_x = F.pad(x_rows, (0, 0, 0, padding)) if padding else x_rows
            grad_weight = _onednn_linear(padded_grad.t(), padded_x.t(), None)
        grad_bias = grad_rows.sum(0) if need_bias and ctx.has_bias else None  # type: ignore[attr-defined]
        return grad_x, grad_weight, grad_bias


def bucketed_rows(rows: int) -> int:
    """The row count a training product runs at (module docstring): ``rows`` rounded up to a multiple of
    :data:`SMALL_ROW_BUCKET` up to :data:`ROW_BUCKET` rows (so a small product, such as an RNN's step, pads a few
    rows rather than doubling), above by :func:`_grid_rows` with steps of at least ROW_BUCKET (multiples of 128
    up to 2,048 rows, of 256 up to 4,096, then 8 counts per doubling)."""
    if rows <= ROW_BUCKET:
        return -(-rows // SMALL_ROW_BUCKET) * SMALL_ROW_BUCKET
    return _grid_rows(rows, ROW_BUCKET)


def buckets_rows(x: torch.Tensor, dtype: torch.dtype | None = None) -> bool:
    """Whether training products of ``x`` pad their rows to :func:`bucketed_rows`: on a CPU with bf16 products,
    from CPU autocast or, where given, the products' ``dtype`` (the caller knows whether it trains)."""
    if not x.is_cpu:
        return False
    if dtype is None:
        dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else x.dtype
    return dtype == torch.bfloat16


def pads_training_rows(x: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether training products of ``x`` by ``weight`` in ``dtype`` pad their rows to :func:`bucketed_rows`:
    bf16 products on a CPU (:func:`buckets_rows`) and float32 products that go to oneDNN (module docstring). A
    caller that runs its own products (the output layer's chunked loss) asks this; :func:`linear` pads its own."""
    return buckets_rows(x, dtype) or (dtype == torch.float32 and _use_onednn(x, weight))


class _Bf16Linear(torch.autograd.Function):
    """y = x W^T + b in bf16 on rows padded by zero rows to :func:`bucketed_rows` (module docstring), as CPU
    autocast would compute it (bf16 factors, a bf16 result; the gradients of W and b in bf16, then in their own
    dtype), with dx = dy W, dW = dy^T x, db = Σ dy. It keeps x in bf16 unpadded for the backward pass, where
    autocast's ``F.linear`` on the padded rows kept the padded copy: a copy of every product's input beside the
    input itself where that is bf16 already (the FFN's hidden activations, the largest a layer keeps), so a bf16
    small model trained with 1.09x the memory of float32 (``bench/results/cpu_defaults_amd_avx512.md``). W is
    kept as it is and cast again there: a bf16 copy per product would pile up over an RNN's time steps."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        """(…, K) x, (M, K) W, (M,) b or None (any float dtype) -> (…, M) in bf16."""
        half = torch.bfloat16
        x_half, weight_half = x.to(half), weight.to(half)
        bias_half = bias.to(half) if bias is not None else None
        ctx.save_for_backward(x_half, weight)  # W itself, cast again in the backward pass: no copy of it kept
        ctx.dtypes = (x.dtype, weight.dtype, bias.dtype if bias is not None else None)  # type: ignore[attr-defined]
        padded_rows = bucketed_rows(x.numel() // max(x.size(-1), 1))
        with torch.autocast("cpu", enabled=False):
            return _padded_product(x_half, padded_rows, weight.size(0),
                                   lambda rows: F.linear(rows, weight_half, bias_half))

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad_y: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """Gradients of x, W and b, each in its input's dtype, for the incoming (…, M) gradient of y."""
        x_half, weight = ctx.saved_tensors  # type: ignore[attr-defined]
        x_dtype, weight_dtype, bias_dtype = ctx.dtypes  # type: ignore[attr-defined]
        need_x, need_weight, need_bias = ctx.needs_input_grad  # type: ignore[attr-defined]
        grad_rows = grad_y.reshape(-1, grad_y.size(-1)).to(torch.bfloat16)
        rows = grad_rows.size(0)
        padding = bucketed_rows(rows) - rows
        padded_grad = F.pad(grad_rows, (0, 0, 0, padding)) if padding else grad_rows
        grad_x = grad_weight = grad_bias = None
        with torch.autocast("cpu", enabled=False):
            if need_x:
                grad_x = (padded_grad @ weight.to(torch.bfloat16))[:rows].view(x_half.shape).to(x_dtype)
            if need_weight:
                x_rows = x_half.reshape(-1, x_half.size(-1))
                padded_x = F.pad(x_rows, (0, 0, 0, padding)) if padding else x_rows
                grad_weight = (padded_grad.t() @ padded_x).to(weight_dtype)
            if need_bias and bias_dtype is not None:
                grad_bias = grad_rows.sum(0).to(bias_dtype)
        return grad_x, grad_weight, grad_bias


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` = x W^T + b on the active backend (oneDNN or torch's path, or the one timed
    faster for its shape and a beam's rows); in bf16 on a CPU with the rows padded to :func:`bucketed_rows` in
    training, to :func:`inference_rows` without gradients (module docstring)."""
    if (_timed and x.is_cpu and x.dtype == torch.float32 and weight.dtype == torch.float32
            and not torch.is_grad_enabled()):
        rows = x.numel() // max(x.shape[-1], 1)
        if rows <= SMALL_ROW_BUCKET:  # more rows keep the rule's backend untimed
            entry = _decided.get((weight.shape, rows))
            if isinstance(entry, str):
                return _product(entry, x, weight, bias)
            if entry is not None and entry.untimed:
                return entry.untimed_product(x, weight, bias)
            if _timeable(x, weight, bias):
                return _timed_linear(x, weight, bias, rows)
    if not _use_onednn(x, weight):
        if not buckets_rows(x):
            return F.linear(x, weight, bias)
        if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
            return _Bf16Linear.apply(x, weight, bias)
        return _inference_product(x, weight.size(0), lambda rows: F.linear(rows, weight, bias))
    if _needs_grad(x, weight, bias):
        return _OneDnnLinear.apply(x, weight, bias)
    return _onednn_inference(x, weight, bias)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b for 2-D ``a`` (N, K) and ``b`` (K, M), without autograd, on the active backend."""
    if not _use_onednn(a, b):
        return a @ b
    return _onednn_linear(a, b.t(), None)


class Linear(nn.Linear):
    """``nn.Linear`` whose product runs on the active backend (:func:`linear`); same parameters and state."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(…, in_features) -> (…, out_features)."""
        return linear(x, self.weight, self.bias)
