"""ordo's translation speed on a real test set against CTranslate2 running ordo's own export (issue 28).

Beam search with the run's decoding settings (``decode`` in its config.yaml: beam size, length penalty,
``max_len_a``/``max_len_b``, ``min_len``), 2 threads per system, in two regimes:

- large: the whole file at once. ordo as ``ordo translate`` does it (length-sorted batches of
  ``decode.max_tokens`` padded source positions, EOS included); CTranslate2 with the same budget as its own
  token batching (``max_batch_size=decode.max_tokens, batch_type="tokens"``, which counts padded pieces
  without the EOS it appends); the report gives each one's number of batches;
- small: the first ``--small`` sentences one at a time, as a server's requests arrive.

Systems: ordo float32 with its linear layers on torch's BLAS (``decode.cpu_gemm=blas``) and on oneDNN
(``decode.cpu_gemm=onednn``, packed weights: what ``auto`` picks on a CPU not made by Intel, and CTranslate2's
fp32 GEMM backend there; :mod:`ordo.gemm`), ordo ``--int8`` (dynamic int8 projections), ordo ``--amp bf16``
on a CPU that has bf16 in hardware (AVX512_BF16 or AMX; paired with CTranslate2 int8, since CTranslate2 has no
bf16 on CPUs), CTranslate2
``compute_type`` float32 and int8 (``intra_threads`` 2, ``inter_threads`` 1) on ``ordo export --format
ctranslate2``. CTranslate2 gets ordo's settings
where it has them: ``return_end_token`` so that the length its length penalty divides by counts EOS as ordo's
does, ``max_decoding_length`` = ordo's output limit + 1 (per sentence in the small regime, the largest of the
file in the large one) and ``min_decoding_length`` = ``decode.min_len``.

Every measurement runs in its own process, timed after the model is loaded and one warm-up sentence is
translated; text in, text out (SentencePiece on both sides included, with ordo's vocabulary for both). The
systems alternate within each of ``--rounds`` rounds (their order rotating), so drift on a shared host hits
all of them; the report gives medians, the rounds' range and the per-round ratios ordo / CTranslate2. It
also times the start-up of ``ordo translate`` for one sentence (process wall time) beside ``import torch``,
and profiles single-sentence decoding (bench/decode_profile.py).

usage: python bench/decode_real.py --model RUN --checkpoint averaged --src FILE --ref FILE [--rounds 3]
           [--small 200] [--threads 2] [--profile-sentences 50] [--out bench/results/decode_real.md]
           [--json-out FILE]      (each system's median sentences/s per regime and the ratios, for make bench)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

if not __package__:  # run as `python bench/NAME.py`: the repository root, not bench/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.machine import cpu_description
from ordo.data.textio import atomic_write, read_lines

SYSTEMS = {  # name -> label in the report
    "ordo-fp32": "ordo fp32, torch's BLAS (`decode.cpu_gemm=blas`)",
    "ordo-fp32-onednn": "ordo fp32, oneDNN (`decode.cpu_gemm=onednn`)",
    "ordo-int8": "ordo int8 (`--int8`)",
    "ordo-bf16": "ordo bf16 (`--amp bf16`; run only on a CPU with native bf16)",
    "ct2-fp32": "CTranslate2 fp32",
    "ct2-int8": "CTranslate2 int8",
}
CPU_GEMM = {"ordo-fp32": "blas", "ordo-fp32-onednn": "onednn", "ordo-int8": "blas", "ordo-bf16": "blas"}  # decode.cpu_gemm
CT2_TYPES = {"ct2-fp32": "float32", "ct2-int8": "int8"}
PAIRS = (("ordo-fp32", "ct2-fp32"), ("ordo-fp32-onednn", "ct2-fp32"), ("ordo-int8", "ct2-int8"),
         ("ordo-bf16", "ct2-int8"))  # CTranslate2 has no bf16 on CPUs: its fastest type there
REGIMES = ("large", "small")
HERE = Path(__file__).resolve().parent
DIFFERENCES = ("Lines (1-based) whose output differs from ordo fp32's, * where either output stopped at its length "
               "limit (ordo: max_len_a x (pieces + 1) + max_len_b tokens, then EOS is forced; CTranslate2: one "
               "max_decoding_length per call, in the large regime the largest of the file, where a hypothesis ends "
               "without EOS):")
WHY_THEY_DIFFER = ("Why they can differ: both toolkits run the same beam search (the 2 x beam best candidates, EOS "
                   "among the first beam ends a hypothesis, a sentence is done with beam finished ones, score = "
                   "log-prob / (tokens + EOS) ^ length_penalty), so in float32 only the length limit above and the "
                   "summation order of different matmul kernels (about 1e-6 apart) can part them. In int8 ordo "
                   "(PyTorch's dynamic quantization) quantizes each projection's input with one scale for the whole "
                   "tensor, all rows of the batch, and CTranslate2 with one scale per row: an ordo int8 translation "
                   "depends on the sentences batched with it (the small regime against the large one shows it), a "
                   "CTranslate2 one does not, and the two round differently. bf16 rounds the inputs of every "
                   "product to 8 significant bits, so its translations part from float32's more often.")


def native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (the ``avx512_bf16`` or ``amx_bf16`` flag), where ``--amp bf16``
    pays; elsewhere PyTorch emulates it, slower than float32, and the ordo-bf16 system is not run."""
    from ordo.gemm import cpuinfo

    return bool(set(cpuinfo().get("flags", "").split()) & {"avx512_bf16", "amx_bf16"})


def run_decode_config(run_dir: Path) -> Any:
    """The ``decode`` and ``model`` sections of a run's config.yaml."""
    from ordo.config import build_config
    from ordo.data.textio import read_yaml

    cfg = build_config(read_yaml(run_dir / "config.yaml"), str(run_dir / "config.yaml"))
    return cfg.decode, cfg.model


def output_limits(lengths: list[int], decode: Any, model: Any) -> list[int]:
    """ordo's maximum output tokens (EOS not counted) for sources of ``lengths`` pieces (EOS not counted)."""
    from ordo.decoding.search import max_output_lengths

    src_lengths = torch.tensor(lengths) + 1  # ordo's source length counts its EOS
    limits = max_output_lengths(src_lengths, decode.max_len_a, decode.max_len_b, model.max_positions - 1)
    return [int(limit) for limit in limits]


def ordo_translate(args: argparse.Namespace, lines: list[str]) -> tuple[list[str], float, float, list[int]]:
    """(outputs, seconds, load seconds, indices of the outputs that stopped at ordo's length limit) of an ordo
    system over ``lines`` in ``args.regime``."""
    from ordo.api import load_run

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    run = load_run(args.model, args.checkpoint, "cpu", int8=args.one == "ordo-int8")
    loaded = time.perf_counter() - start
    decode = {"cpu_gemm": CPU_GEMM[args.one], "amp": "bf16" if args.one == "ordo-bf16" else "off"}
    run.translate(lines[:1], **decode)  # warm-up
    start = time.perf_counter()
    if args.regime == "large":
        hyps = [nbest[0] for nbest in run.translate_hypotheses(lines, **decode)]
    else:
        hyps = [run.translate_hypotheses([line], **decode)[0][0] for line in lines]
    outputs = [run.detokenize(hyp) for hyp in hyps]  # what run.translate returns
    seconds = time.perf_counter() - start
    limits = output_limits([len(row) for row in run.encode_sources(lines)], run.cfg.decode, run.cfg.model)
    return outputs, seconds, loaded, [i for i, (h, limit) in enumerate(zip(hyps, limits)) if len(h.tokens) >= limit]


def ct2_translate(args: argparse.Namespace, lines: list[str]) -> tuple[list[str], float, float, list[int]]:
    """(outputs, seconds, load seconds, indices of the outputs that stopped at the length limit without EOS) of a
    CTranslate2 system over ``lines`` in ``args.regime``."""
    import ctranslate2

    from ordo.data.corpus import load_vocabs

    start = time.perf_counter()
    decode, model = run_decode_config(args.model)
    src_vocab, tgt_vocab = load_vocabs(args.model)
    translator = ctranslate2.Translator(str(args.ct2_dir), device="cpu", compute_type=CT2_TYPES[args.one],
                                        inter_threads=1, intra_threads=args.threads)
    loaded = time.perf_counter() - start
    options = {"beam_size": decode.beam_size, "length_penalty": decode.length_penalty,
               "min_decoding_length": decode.min_len, "return_end_token": True}

    def translate(batch: list[str], **more: Any) -> list[list[str]]:
        pieces = [src_vocab.pieces(src_vocab.encode(line)) for line in batch]
        limits = output_limits([len(p) for p in pieces], decode, model)
        results = translator.translate_batch(pieces, max_decoding_length=max(limits) + 1, **options, **more)
        return [result.hypotheses[0] for result in results]

    def text_of(pieces: list[str]) -> str:
        ids = [tgt_vocab.processor.piece_to_id(p) for p in pieces if p != "</s>"]  # type: ignore[union-attr]
        return tgt_vocab.decode(ids)

    translate(lines[:1])  # warm-up
    start = time.perf_counter()
    if args.regime == "large":
        hyps = translate(lines, max_batch_size=decode.max_tokens, batch_type="tokens")
    else:
        hyps = [translate([line])[0] for line in lines]
    outputs = [text_of(hyp) for hyp in hyps]
    seconds = time.perf_counter() - start
    return outputs, seconds, loaded, [i for i, hyp in enumerate(hyps) if hyp[-1:] != ["</s>"]]


def run_one(args: argparse.Namespace) -> None:
    """The ``--one`` child: translate, write the outputs to ``--hyp-out``, print the timing as JSON."""
    lines = read_lines(args.src)
    if args.regime == "small":
        lines = lines[: args.small]
    translate = ct2_translate if args.one.startswith("ct2") else ordo_translate
    outputs, seconds, loaded, at_limit = translate(args, lines)
    with atomic_write(args.hyp_out) as handle:
        handle.writelines(line + "\n" for line in outputs)
    print(json.dumps({"sent_per_s": len(lines) / seconds, "seconds": seconds, "load_s": loaded, "at_limit": at_limit}))


def child(args: argparse.Namespace, system: str, regime: str, ct2_dir: Path, hyp: Path) -> dict:
    """One measurement in a fresh process: its figures, or ``{"error": ...}``."""
    command = [sys.executable, __file__, "--one", system, "--regime", regime, "--model", str(args.model),
               "--checkpoint", args.checkpoint, "--src", str(args.src), "--ref", str(args.ref),
               "--small", str(args.small), "--threads", str(args.threads), "--ct2-dir", str(ct2_dir),
               "--hyp-out", str(hyp)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}


def wall_seconds(command: list[str], stdin: str = "") -> float:
    """Wall time of a process running ``command`` with ``stdin``; raises if it fails."""
    start = time.perf_counter()
    subprocess.run(command, input=stdin, capture_output=True, text=True, check=True)
    return time.perf_counter() - start


def startup(args: argparse.Namespace, first_line: str) -> dict[str, float]:
    """Process wall times: ``ordo translate`` of one sentence, and ``import torch`` alone."""
    translate = [sys.executable, "-m", "ordo", "translate", "--model", str(args.model), "--checkpoint",
                 args.checkpoint]
    return {"ordo translate, one sentence": wall_seconds(translate, first_line + "\n"),
            "python -c 'import torch'": wall_seconds([sys.executable, "-c", "import torch"])}


def batch_layouts(args: argparse.Namespace, lines: list[str]) -> str:
    """How each toolkit cuts the whole file in the large regime: batches and the most sentences in one."""
    from ordo.data.batching import batch_by_tokens, epoch_batches
    from ordo.data.corpus import load_vocabs

    decode, _ = run_decode_config(args.model)
    src_vocab, _ = load_vocabs(args.model)
    lengths = np.array([len(src_vocab.encode(line)) for line in lines])
    ours = epoch_batches(lengths, None, decode.max_tokens, seed=0, epoch=0, shuffle=False)
    theirs = batch_by_tokens(lengths, np.argsort(-lengths, kind="stable"), decode.max_tokens)  # CT2's rule
    return (f"large-regime batches: ordo {len(ours)} (at most {max(map(len, ours))} sentences, "
            f"{decode.max_tokens} padded source positions with EOS), CTranslate2 {len(theirs)} (at most "
            f"{max(map(len, theirs))} sentences, {decode.max_tokens} padded pieces without EOS); "
            f"source pieces per sentence: mean {lengths.mean():.1f}, max {lengths.max()}")


def ct2_backends(ct2_dir: Path, threads: int) -> str:
    """The GEMM backends CTranslate2 reports choosing on this CPU (its verbose log)."""
    code = f"import ctranslate2; ctranslate2.Translator({str(ct2_dir)!r}, device='cpu', intra_threads={threads})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          env={**os.environ, "CT2_VERBOSE": "1"})
    found = [line.split("[info]", 1)[1].strip(" -") for line in done.stderr.splitlines()
             if "backend" in line or "Selected ISA" in line]
    return "; ".join(found) or "not reported"


def bleu(hyps: list[str], refs: list[str]) -> float:
    """sacreBLEU (13a) of ``hyps``."""
    from ordo.evaluation.bleu import corpus_scores

    return float(corpus_scores(hyps, refs)["bleu"])


def spread(values: list[float], digits: int = 1) -> str:
    """``median (min-max)`` of the rounds."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def differences(outputs: dict, results: dict, shown: int = 10) -> list[str]:
    """Where each system's outputs differ from ordo fp32's, and why they can."""
    lines = [DIFFERENCES, ""]
    for system in list(SYSTEMS)[1:]:
        cells = []
        for regime in REGIMES:
            ours, base = outputs.get((system, regime), []), outputs.get(("ordo-fp32", regime), [])
            limited = {i for name in (system, "ordo-fp32") for r in results[name, regime] for i in r.get("at_limit", [])}
            lines_differ = [i for i, (a, b) in enumerate(zip(ours, base)) if a != b]
            listed = ", ".join(f"{i + 1}{'*' if i in limited else ''}" for i in lines_differ[:shown])
            cells.append(f"{regime} {len(lines_differ)}" + (f" ({listed}{', ...' if len(lines_differ) > shown else ''})"
                                                           if lines_differ else ""))
        lines.append(f"- {SYSTEMS[system]}: {'; '.join(cells)}")
    return [*lines, "", WHY_THEY_DIFFER]


def round_ratios(results: dict, ours: str, theirs: str, regime: str) -> list[float]:
    """ours / theirs sentences/s of each round where both succeeded."""
    return [a["sent_per_s"] / b["sent_per_s"] for a, b in zip(results[ours, regime], results[theirs, regime])
            if "error" not in a and "error" not in b]


def summary(results: dict) -> dict:
    """Each system's median sentences/s per regime (None where every round failed) and each pair's median
    ratio ordo / CTranslate2 per regime."""
    speeds = {f"{system} {regime}": [r["sent_per_s"] for r in results[system, regime] if "error" not in r]
              for system in SYSTEMS for regime in REGIMES}
    ratios = {f"{ours}/{theirs} {regime}": round_ratios(results, ours, theirs, regime)
              for ours, theirs in PAIRS for regime in REGIMES}
    return {"sent_per_s": {k: statistics.median(v) if v else None for k, v in speeds.items()},
            "ratio": {k: statistics.median(v) if v else None for k, v in ratios.items()}}


def report(args: argparse.Namespace, results: dict, outputs: dict, stable: dict, starts: dict, context: dict,
           profile_md: str) -> str:
    """The markdown report; ``context`` holds the load averages, CTranslate2's backends and the batch layouts."""
    import ctranslate2

    refs = read_lines(args.ref)
    expected = {"large": refs, "small": refs[: args.small]}
    unstable = [SYSTEMS[name] for name, same in stable.items() if not same]
    setting = (f"torch {torch.__version__}, ctranslate2 {ctranslate2.__version__}; {args.threads} threads per system; "
               f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}; {args.rounds} round(s); load average "
               f"(1, 5, 15 min) {context['load_start']} at the start, {context['load_end']} at the end")
    regimes = (f"{len(refs)} sentences in the large regime, the first {len(expected['small'])} one at a time in the "
               "small one; sentences/s as median (min-max) over the rounds; outputs the same in every round: "
               + ("all systems" if not unstable else f"all but {', '.join(unstable)}"))
    lines = [f"command: `python bench/decode_real.py {shlex.join(sys.argv[1:])}`", "", setting, "",
             f"CPU: {cpu_description()}", "", f"CTranslate2 on this CPU: {context['ct2']}", "", context["batches"], "",
             regimes, "",
             "| system | large sent/s | small sent/s | BLEU large | BLEU small | same as ordo fp32 (large / small) |",
             "|---|---:|---:|---:|---:|---:|"]
    for system, label in SYSTEMS.items():
        cells = []
        for regime in REGIMES:
            speeds = [r["sent_per_s"] for r in results[system, regime] if "error" not in r]
            cells.append(spread(speeds) if speeds else "failed" if results[system, regime] else "not run")
        for regime in REGIMES:
            hyps = outputs.get((system, regime), [])
            cells.append(f"{bleu(hyps, expected[regime]):.2f}" if len(hyps) == len(expected[regime]) else "-")
        same = [sum(a == b for a, b in zip(outputs.get((system, regime), []), outputs.get(("ordo-fp32", regime), [])))
                for regime in REGIMES]
        lines.append(f"| {label} | {' | '.join(cells)} | {same[0]}/{len(refs)} / {same[1]}/{len(expected['small'])} |")
    lines += ["", "ordo / CTranslate2, the ratio of each round's sentences/s (median, min-max):", ""]
    for ours, theirs in PAIRS:
        cells = []
        for regime in REGIMES:
            ratios = round_ratios(results, ours, theirs, regime)
            cells.append(f"{regime} x{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
                         if ratios else f"{regime} n/a")
        lines.append(f"- {SYSTEMS[ours]} / {SYSTEMS[theirs]}: {', '.join(cells)}")
    agree = [f"{SYSTEMS[s]} {sum(a == b for a, b in zip(outputs.get((s, 'small'), []), outputs.get((s, 'large'), [])))}"
             for s in SYSTEMS]
    consistency = ("Small-regime outputs identical to the same system's large-regime outputs of those sentences (of "
                   f"{len(expected['small'])}): {', '.join(agree)}")
    lines += ["", consistency, "", *differences(outputs, results), "", "Start-up (process wall time, median (min-max) over the rounds):", ""]
    lines += [f"- {name}: {spread(values, 2)} s" for name, values in starts.items()]
    failed = [f"- {system} {regime}: {r['error']}" for (system, regime), runs in results.items() for r in runs
              if "error" in r]
    if failed:
        lines += ["", "failed:", *failed]
    profile_command = (f"python bench/decode_profile.py --model {shlex.quote(str(args.model))} --checkpoint "
                       f"{args.checkpoint} --src {shlex.quote(str(args.src))} --sentences {args.profile_sentences} "
                       f"--threads {args.threads}")
    if profile_md:
        lines += ["", "## Where a single sentence's time goes (ordo fp32, beam search)", "",
                  f"command: `{profile_command}` (run by the command above, after its rounds)", "", profile_md.rstrip()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="run directory")
    parser.add_argument("--checkpoint", default="averaged")
    parser.add_argument("--src", type=Path, required=True, help="test sources, one a line")
    parser.add_argument("--ref", type=Path, required=True, help="references, one a line")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", type=int, default=200, help="sentences translated one at a time")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile-sentences", type=int, default=50, help="0: no profile")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "decode_real.md")
    parser.add_argument("--json-out", type=Path, help="also write the medians and ratios as JSON")
    parser.add_argument("--one", choices=list(SYSTEMS), help=argparse.SUPPRESS)
    parser.add_argument("--regime", choices=REGIMES, help=argparse.SUPPRESS)
    parser.add_argument("--ct2-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--hyp-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args)
        return
    from ordo.export import export_ctranslate2

    sources = read_lines(args.src)
    if len(sources) != len(read_lines(args.ref)):
        parser.error(f"{args.src} and {args.ref} differ in length")
    context = {"load_start": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    results: dict[tuple[str, str], list[dict]] = {(s, r): [] for s in SYSTEMS for r in REGIMES}
    outputs: dict[tuple[str, str], list[str]] = {}
    stable = {name: True for name in SYSTEMS}
    starts: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ct2_dir = export_ctranslate2(args.model, Path(tmp) / "ct2", args.checkpoint)
        order = [name for name in SYSTEMS if name != "ordo-bf16" or native_bf16()]
        for round_index in range(args.rounds):
            rotated = order[round_index % len(order):] + order[: round_index % len(order)]
            for regime in REGIMES:
                for system in rotated:
                    hyp = Path(tmp) / f"{system}.{regime}.txt"
                    results[system, regime].append(child(args, system, regime, ct2_dir, hyp))
                    print(f"round {round_index + 1} {regime} {system}", results[system, regime][-1], file=sys.stderr)
                    text = read_lines(hyp) if hyp.exists() else []
                    stable[system] &= outputs.setdefault((system, regime), text) == text
            for name, seconds in startup(args, sources[0]).items():
                starts.setdefault(name, []).append(seconds)
        context.update(load_end=" ".join(f"{x:.2f}" for x in os.getloadavg()), ct2=ct2_backends(ct2_dir, args.threads),
                       batches=batch_layouts(args, sources))
        profile_md = subprocess.run(
            [sys.executable, str(HERE / "decode_profile.py"), "--model", str(args.model), "--checkpoint",
             args.checkpoint, "--src", str(args.src), "--sentences", str(args.profile_sentences), "--threads",
             str(args.threads)], capture_output=True, text=True, check=True).stdout if args.profile_sentences else ""
        text = report(args, results, outputs, stable, starts, context, profile_md)
    with atomic_write(args.out) as handle:
        handle.write(text)
    if args.json_out:
        with atomic_write(args.json_out) as handle:
            json.dump(summary(results), handle, indent=1)
    print(text.rstrip())


if __name__ == "__main__":
    main()
