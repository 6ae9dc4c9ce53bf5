"""Where the time of beam search goes, under ``torch.profiler``: single sentences, or a whole file's batches.

Translates the first ``--sentences`` lines of ``--src`` one at a time (as a server's requests arrive), or
``--batch`` lines a call (``--batch 1000``: a whole file, batched by the run's ``decode.max_tokens`` as ``ordo
translate`` batches it), with the run's decoding settings, twice: once plain (the wall time the profiler is
compared with), once under the profiler with a named scope around each part of the work (the encoder, the
decoder layers' self-attention, cross-attention and FFN, the rest of the decoder, the output projection,
log-softmax and masking, and each step of the beam bookkeeping). Each top-level ATen op is charged to its
innermost scope and, inside the decoder layers, to matmuls (``linear``) or attention (everything else there:
SDPA, the cache's ``cat``, head reshapes); what a scope spends outside any op is Python (and the profiler's own
cost) between ops.

The float32 linear layers multiply where ``--cpu-gemm`` says (``decode.cpu_gemm``, :mod:`ordo.gemm`); the
matmul shapes themselves, torch's BLAS against oneDNN, are timed by bench/cpu_gemm.py.

usage: python bench/decode_profile.py --model RUN --checkpoint averaged --src FILE [--sentences 50] [--batch 1]
           [--threads 2] [--int8] [--cpu-gemm auto]        prints the markdown section
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import importlib
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
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
SENTENCE = "sentence"  # the scope around one call's translation: set-up and the search loop itself
MODEL_SCOPES = {"self_attn", "cross_attn", "ffn", "decoder_rest", "output"}
MATMULS = {"aten::linear", "aten::addmm", "aten::mm", "aten::matmul", "quantized::linear_dynamic",
           "mkldnn::_linear_pointwise"}



def ops_of(*scopes: str) -> set[tuple[str, str]]:
    """The (scope, op kind) keys of the ops, matmuls or not, of ``scopes``."""
    return {(scope, kind) for scope in scopes for kind in ("matmul", "other")}


# table rows: (label, the (scope, op kind) pairs it sums); op kind "matmul", "other" or "python"
ROWS: list[tuple[str, set[tuple[str, str]]]] = [
    ("encoder (once per call; its Python included)", ops_of("encoder") | {("encoder", "python")}),
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


def profile_translation(run: Any, lines: list[str], batch: int = 1) -> dict[str, Any]:
    """Translating ``lines``, ``batch`` a call, twice: with wall-clock timers around the encoder and the decoder
    steps alone (the plain time and its coarse split), then under the profiler (its charges, :func:`charge`)."""
    calls = [lines[start:start + batch] for start in range(0, len(lines), batch)]
    run.translate(calls[0])  # warm-up: the kernels' first-call set-up is not the steady state
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    undo = wrap_methods(PLAIN_PARTS, functools.partial(timed, totals))
    try:
        start = time.perf_counter()
        for call in calls:
            run.translate(call)
        plain = time.perf_counter() - start
    finally:
        undo()
    undo = wrap_methods(SCOPES, scoped)
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            for call in calls:
                with record_function(SENTENCE):
                    run.translate(call)
            profiled = time.perf_counter() - start
    finally:
        undo()
    spent, ops = charge(prof.events())
    return {"plain_s": plain, "parts_s": {part: seconds for part, (seconds, _) in totals.items()},
            "steps": int(totals["decoder steps"][1]), "calls": len(calls), "profiled_s": profiled, "ops": ops,
            "spent": spent}


def profile_table(result: dict[str, Any], sentences: int) -> list[str]:
    """The markdown table of :func:`profile_translation`'s result."""
    spent, steps = result["spent"], result["steps"]
    total = sum(spent.values())
    plain, parts = result["plain_s"], result["parts_s"]
    rest = plain - sum(parts.values())
    summary = (f"{sentences} sentences in {result['calls']} translate calls, {steps} decoder steps "
               f"({steps / result['calls']:.1f} per call), "
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


def section(model_dir: str, checkpoint: str, src: str, sentences: int, threads: int, int8: bool, cpu_gemm: str,
            batch: int = 1) -> str:
    """The markdown section: the profile of beam search over ``batch`` sentences a call with ``decode.cpu_gemm`` =
    ``cpu_gemm``."""
    from ordo.api import load_run
    from ordo.data.textio import read_lines

    torch.set_num_threads(threads)
    run = load_run(model_dir, checkpoint, "cpu", int8=int8)
    run.cfg.decode = dataclasses.replace(run.cfg.decode, cpu_gemm=cpu_gemm)
    lines = read_lines(src)[:sentences]
    return "\n".join(profile_table(profile_translation(run, lines, batch), len(lines))) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="run directory")
    parser.add_argument("--checkpoint", default="averaged")
    parser.add_argument("--src", required=True, help="source sentences, one a line")
    parser.add_argument("--sentences", type=int, default=50)
    parser.add_argument("--batch", type=int, default=1, help="sentences a translate call (1: one at a time)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--int8", action="store_true", help="profile ordo translate --int8 instead")
    parser.add_argument("--cpu-gemm", choices=["auto", "onednn", "blas"], default="auto",
                        help="decode.cpu_gemm: where the float32 linear layers multiply (ordo.gemm)")
    args = parser.parse_args()
    sys.stdout.write(section(args.model, args.checkpoint, args.src, args.sentences, args.threads, args.int8,
                             args.cpu_gemm, args.batch))


if __name__ == "__main__":
    main()
