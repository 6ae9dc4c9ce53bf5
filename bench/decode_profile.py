"""Where the time of a small batch goes: ordo's beam search over single sentences, under ``torch.profiler``.

Translates the first ``--sentences`` lines of ``--src`` one at a time (as a server's requests arrive) with the
run's decoding settings, twice: once plain (the wall time the profiler is compared with), once under the
profiler with a named scope around each part of the work (the encoder, the decoder layers' self-attention,
cross-attention and FFN, the rest of the decoder, the output projection, log-softmax and masking, and each step
of the beam bookkeeping). Each top-level ATen op is charged to its innermost scope and, inside the decoder
layers, to matmuls (``linear``) or attention (everything else there: SDPA, the cache's ``cat``, head
reshapes); what a scope spends outside any op is Python (and the profiler's own cost) between ops.

A second table times the model's matmuls at the shapes a beam of 5 gives and at a large batch's, with
PyTorch's default fp32 kernel (MKL's sgemm) against oneDNN with its weights packed ahead (the fp32 GEMM
backend CTranslate2 selects on a CPU that is not Intel's), alternating the two in rounds.

usage: python bench/decode_profile.py --model RUN --checkpoint averaged --src FILE [--sentences 50]
           [--threads 2] [--int8]        prints the markdown section
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

# the scopes and the module attributes they wrap: (owner, attribute) -> scope name
SEARCH = "ordo.decoding.search"
SCOPES: dict[tuple[str, str], str] = {
    ("ordo.models.transformer:TransformerModel", "encode"): "encoder",
    ("ordo.models.attention:SelfAttention", "forward"): "self_attn",
    ("ordo.models.attention:CrossAttention", "forward"): "cross_attn",
    ("ordo.models.transformer:FeedForward", "forward"): "ffn",
    ("ordo.models.transformer:TransformerDecoder", "forward"): "decoder_rest",
    ("ordo.models.transformer:TransformerModel", "step_logits"): "output",
    (SEARCH, "_next_log_probs"): "log_softmax",
    (SEARCH, "_top_candidates"): "topk",
    (SEARCH, "_collect_finished"): "finished",
    (SEARCH, "_advance"): "advance",
    ("ordo.models.outputs:DecoderState", "reorder"): "reorder",
    ("ordo.models.outputs:DecoderState", "repeat_rows"): "reorder",
}
# the two calls timed without the profiler (which adds a cost to every op): the encoder and the decoder steps
PLAIN_PARTS = {("ordo.models.transformer:TransformerModel", "encode"): "encoder",
               ("ordo.models.transformer:TransformerModel", "decode_step"): "decoder steps"}
SENTENCE = "sentence"  # the scope around one sentence's translation: set-up and the search loop itself
MODEL_SCOPES = {"self_attn", "cross_attn", "ffn", "decoder_rest", "output"}
MATMULS = {"aten::linear", "aten::addmm", "aten::mm", "aten::matmul", "quantized::linear_dynamic"}



def ops_of(*scopes: str) -> set[tuple[str, str]]:
    """The (scope, op kind) keys of the ops, matmuls or not, of ``scopes``."""
    return {(scope, kind) for scope in scopes for kind in ("matmul", "other")}


# table rows: (label, the (scope, op kind) pairs it sums); op kind "matmul", "other" or "python"
ROWS: list[tuple[str, set[tuple[str, str]]]] = [
    ("encoder (once per sentence; its Python included)", ops_of("encoder") | {("encoder", "python")}),
    ("decoder layers: matmuls (QKV, out, cross-attention Q/KV/out, FFN)",
     {(s, "matmul") for s in ("self_attn", "cross_attn", "ffn")}),
    ("decoder layers: attention (SDPA, cache append, head split/merge)",
     {("self_attn", "other"), ("cross_attn", "other")}),
    ("decoder: embedding, positions, layer norms, residual adds, ReLU", ops_of("decoder_rest") | {("ffn", "other")}),
    ("output projection (H W_o^T)", ops_of("output")),
    ("log-softmax, PAD/BOS (and EOS) masking", ops_of("log_softmax")),
    ("beam: top-k of the candidates", ops_of("topk")),
    ("beam: finished hypotheses", ops_of("finished")),
    ("beam: live candidates, token append (gather, cat)", ops_of("advance")),
    ("beam: cache reorder (index_select)", ops_of("reorder")),
    ("search loop, per-sentence set-up (tokens, batch, limits)", ops_of(SENTENCE)),
    ("Python between ops, in the model's modules", {(s, "python") for s in MODEL_SCOPES}),
    ("Python between ops, in search and set-up",
     {(s, "python") for s in ("log_softmax", "topk", "finished", "advance", "reorder", SENTENCE)}),
]


def _resolve(owner: str) -> Any:
    """The module or class named ``package.module`` or ``package.module:Class``."""
    module_name, _, class_name = owner.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, class_name) if class_name else module


def scoped(function: Callable[..., Any], scope: str) -> Callable[..., Any]:
    """``function`` run inside a ``record_function`` named ``scope``."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with record_function(scope):
            return function(*args, **kwargs)

    return wrapper


def timed(totals: dict[str, list[float]], function: Callable[..., Any], part: str) -> Callable[..., Any]:
    """``function`` adding its wall seconds and one call to ``totals[part]`` ([seconds, calls]) each time."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            totals[part][0] += time.perf_counter() - start
            totals[part][1] += 1

    return wrapper


def wrap_methods(targets: dict[tuple[str, str], str], wrap: Callable[[Callable[..., Any], str], Callable[..., Any]]
                 ) -> Callable[[], None]:
    """Replace each attribute of ``targets`` by ``wrap(attribute, its name in targets)``; returns the undo."""
    originals = []
    for (owner_name, attribute), name in targets.items():
        owner = _resolve(owner_name)
        original = getattr(owner, attribute)
        setattr(owner, attribute, wrap(original, name))
        originals.append((owner, attribute, original))

    def undo() -> None:
        for owner, attribute, original in reversed(originals):
            setattr(owner, attribute, original)

    return undo


def charge(events: Any) -> tuple[collections.Counter, int]:
    """Microseconds per (scope, op kind) and the number of top-level ops, from the profiler's events.

    A scope's own time (its inclusive time less that of the scopes nested in it) is split into its top-level
    ops' time, by kind ("matmul" or "other"), and "python", the rest. Everything inside the encoder (whose
    layers use the same attention and FFN modules) is the encoder's.
    """
    names = set(SCOPES.values()) | {SENTENCE}

    def scope_of(event: Any) -> Any:
        """The innermost scope around ``event``, or the encoder's when it is inside the encoder."""
        found, parent = None, event.cpu_parent
        while parent is not None:
            if parent.name == "encoder":
                return parent
            if found is None and parent.name in names:
                found = parent
            parent = parent.cpu_parent
        return found

    spent: collections.Counter = collections.Counter()
    own: collections.Counter = collections.Counter()
    ops = 0
    for event in events:
        elapsed = event.time_range.elapsed_us()
        outer = scope_of(event)
        if event.name in names:
            if outer is not None and outer.name == "encoder":
                continue  # a scope inside the encoder: its time stays the encoder's
            own[event.name] += elapsed
            if outer is not None:
                own[outer.name] -= elapsed
        elif outer is not None and event.cpu_parent.name in names:  # a top-level op, not one inside another
            spent[outer.name, "matmul" if event.name in MATMULS else "other"] += elapsed
            ops += 1
    for scope, total in own.items():
        spent[scope, "python"] = total - spent[scope, "matmul"] - spent[scope, "other"]
    return spent, ops


def profile_single_sentences(run: Any, lines: list[str]) -> dict[str, Any]:
    """Translating ``lines`` one at a time, twice: with wall-clock timers around the encoder and the decoder steps
    alone (the plain time and its coarse split), then under the profiler (its charges, :func:`charge`)."""
    run.translate(lines[:1])  # warm-up: the kernels' first-call set-up is not the steady state
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    undo = wrap_methods(PLAIN_PARTS, functools.partial(timed, totals))
    try:
        start = time.perf_counter()
        for line in lines:
            run.translate([line])
        plain = time.perf_counter() - start
    finally:
        undo()
    undo = wrap_methods(SCOPES, scoped)
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            for line in lines:
                with record_function(SENTENCE):
                    run.translate([line])
            profiled = time.perf_counter() - start
    finally:
        undo()
    spent, ops = charge(prof.events())
    return {"plain_s": plain, "parts_s": {part: seconds for part, (seconds, _) in totals.items()},
            "steps": int(totals["decoder steps"][1]), "profiled_s": profiled, "ops": ops, "spent": spent}


def profile_table(result: dict[str, Any], sentences: int) -> list[str]:
    """The markdown table of :func:`profile_single_sentences`'s result."""
    spent, steps = result["spent"], result["steps"]
    total = sum(spent.values())
    plain, parts = result["plain_s"], result["parts_s"]
    rest = plain - sum(parts.values())
    summary = (f"{sentences} sentences, {steps} decoder steps ({steps / sentences:.1f} per sentence), "
               f"{result['ops'] / steps:.0f} top-level ATen ops per step. Without the profiler: {plain:.2f} s "
               f"({1e3 * plain / steps:.2f} ms per step), of which the decoder steps (output projection included) "
               f"{100 * parts['decoder steps'] / plain:.1f}%, the encoder {100 * parts['encoder'] / plain:.1f}%, "
               f"and search, log-softmax and per-sentence set-up {100 * rest / plain:.1f}% ({1e6 * rest / steps:.0f} "
               f"µs per step). Under the profiler: {result['profiled_s']:.2f} s; its own cost weighs most on the "
               "small ops and the Python rows, so these shares overstate them:")
    lines = [summary, "", "| part | share | ms per sentence | µs per step |", "|---|---:|---:|---:|"]
    covered = 0.0
    for label, keys in ROWS:
        value = sum(spent[key] for key in keys)
        covered += value
        lines.append(f"| {label} | {100 * value / total:.1f}% | {value / 1e3 / sentences:.2f} | {value / steps:.0f} |")
    assert abs(covered - total) < 1e-3 * total + 1, "a profiled scope or op kind is missing from ROWS"
    lines.append(f"| total | 100% | {total / 1e3 / sentences:.2f} | {total / steps:.0f} |")
    return lines


def packed_linear(weight: torch.Tensor, bias: torch.Tensor | None, rows: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """``x -> F.linear(x, weight, bias)`` by oneDNN on a weight packed ahead for ``rows`` input rows."""
    packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), rows)
    fixed_bias = None if bias is None else bias.detach()
    return lambda x: torch.ops.mkldnn._linear_pointwise(x, packed, fixed_bias, "none", [], "")


class PackedLinear(nn.Module):
    """A linear layer (or an output projection, without bias) run by oneDNN on prepacked weights."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, rows: int) -> None:
        super().__init__()
        self.apply_linear = packed_linear(weight, bias, rows)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., in) -> (..., out)."""
        return self.apply_linear(x)


def pack_onednn(module: nn.Module, rows: int = 5) -> None:
    """Replace every ``nn.Linear`` and output projection in ``module`` by a :class:`PackedLinear` (in place):
    the what-if of bench/decode_real.py, not a path of ordo (the sums round differently from MKL's)."""
    from ordo.models.transformer import OutputProjection

    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            setattr(module, name, PackedLinear(child.weight, child.bias, rows))
        elif isinstance(child, OutputProjection):
            setattr(module, name, PackedLinear(child.weight, None, rows))
        else:
            pack_onednn(child, rows)


def time_calls(function: Callable[[], object], calls: int) -> float:
    """Microseconds per call of ``function`` over ``calls`` calls, after a few untimed ones."""
    for _ in range(3):
        function()
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return 1e6 * (time.perf_counter() - start) / calls


def gemm_table(model: Any, rounds: int = 5) -> list[str]:
    """MKL sgemm (PyTorch's fp32 ``linear``) against oneDNN with packed weights, per matmul shape of the
    decoder, at 5 rows (one sentence's beam) and 1,500 rows (a 6,000-token batch's beams at step 1)."""
    if not hasattr(torch.ops.mkldnn, "_reorder_linear_weight"):
        return ["(this PyTorch has no oneDNN linear ops: no comparison)"]
    layer = model.decoder.layers[0]
    shapes = {"self-attention QKV": layer.self_attn.qkv, "self-attention out": layer.self_attn.out,
              "cross-attention Q": layer.cross_attn.q, "FFN in": layer.ffn.fc1, "FFN out": layer.ffn.fc2}
    weights = {name: (linear.weight.detach(), linear.bias.detach()) for name, linear in shapes.items()}
    weights["output projection"] = (model.output.weight.detach(), None)
    header = "| matmul (rows x in -> out) | MKL µs | oneDNN packed µs | MKL / oneDNN (median of rounds) | max abs diff |"
    lines = [header, "|---|---:|---:|---:|---:|"]
    with torch.inference_mode():
        for rows in (5, 1500):
            for name, (weight, bias) in weights.items():
                x = torch.randn(rows, weight.size(1))
                packed = packed_linear(weight, bias, rows)
                calls = max(3, 3000 // rows)
                mkl, dnnl = [], []
                plain = functools.partial(F.linear, x, weight, bias)
                fast = functools.partial(packed, x)
                for _ in range(rounds):
                    mkl.append(time_calls(plain, calls))
                    dnnl.append(time_calls(fast, calls))
                ratio = statistics.median(a / b for a, b in zip(mkl, dnnl))
                diff = (F.linear(x, weight, bias) - packed(x)).abs().max().item()
                lines.append(f"| {name} ({rows} x {weight.size(1)} -> {weight.size(0)}) | {statistics.median(mkl):.0f} "
                             f"| {statistics.median(dnnl):.0f} | x{ratio:.2f} | {diff:.1e} |")
    return lines


def section(model_dir: str, checkpoint: str, src: str, sentences: int, threads: int, int8: bool) -> str:
    """The markdown section: the profile of single-sentence beam search and, in float32, the GEMM table."""
    from ordo.api import load_run
    from ordo.data.textio import read_lines

    torch.set_num_threads(threads)
    run = load_run(model_dir, checkpoint, "cpu", int8=int8)
    lines = read_lines(src)[:sentences]
    parts = profile_table(profile_single_sentences(run, lines), len(lines))
    if not int8:
        title = (f"The decoder's matmuls, PyTorch's fp32 kernel against oneDNN with packed weights ({threads} threads, "
                 "alternating, 5 rounds):")
        parts += ["", title, "", *gemm_table(run.model)]
    return "\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="run directory")
    parser.add_argument("--checkpoint", default="averaged")
    parser.add_argument("--src", required=True, help="source sentences, one a line")
    parser.add_argument("--sentences", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--int8", action="store_true", help="profile ordo translate --int8 instead")
    args = parser.parse_args()
    sys.stdout.write(section(args.model, args.checkpoint, args.src, args.sentences, args.threads, args.int8))


if __name__ == "__main__":
    main()
