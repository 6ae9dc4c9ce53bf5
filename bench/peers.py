"""ordo against the toolkits researchers would otherwise use, on identical work, in one run (``make bench``).

Shape (the one the peers were first measured at): d_model 256, 4 heads,
FFN 1024, 3+3 layers, joint vocabulary 8000, shared embeddings, dropout 0.1, label smoothing 0.1, Adam;
batches of 160 sentence pairs of 25 random tokens; 2 threads. Figures:

- training target tokens/s (8 timed steps after 3 warm-up steps; forward, loss, backward, Adam), and the FLOP/s
  it achieves against the machine's fp32 matmul peak (2048² GEMMs);
- greedy and beam-5 translation of 32 sentences with exactly 30 output tokens each, sentences/s, for ordo in
  float32 and with dynamic int8 projections (``ordo translate --int8``);
- peak resident memory of the process that did the work.

Peers: Hugging Face transformers ``MarianMTModel`` (train, ``generate``) and CTranslate2 (translate), the
latter running ordo's own weights through ``ordo export --format ctranslate2`` (their outputs are compared).
Every measurement runs in its own process (clean peak memory); they run one after the other, in ``--rounds``
rounds (default 3), and the report keeps each figure's median.

First a real corpus (unless ``--no-real``; ``--no-synthetic`` runs it alone): beam-5 translation of Multi30k
test2016 (1,000 sentences, the whole file and the first 100 one at a time) by ordo fp32 (torch's BLAS and
oneDNN), ``--int8`` and CTranslate2 fp32 and int8 on ordo's export, through bench/decode_real.py, whose report
goes to ``--real-out`` under a summary table. The model is
``--real-run`` if given (a trained Multi30k run), else the Multi30k recipe's model trained here for
``--real-updates`` updates (prepared and trained under ``--real-work``, reused by later runs): real sentence
lengths and a model that ends its outputs, which random weights do not give.

usage: python bench/peers.py [--rounds 3] [--out bench/results/peers.md] [--no-real | --real-run RUN]
           [--no-synthetic]
    the last line printed reads ``train xA beam5 xB xC`` (B and C from ordo's fastest beam-5 path, int8, as the
    speed issue allows; the line before gives float32's)
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

if not __package__:  # run as `python bench/NAME.py`: the repository root, not bench/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench import decode_real
from bench.machine import cpu_description
from ordo.data.textio import atomic_write

HERE = Path(__file__).resolve().parent
MULTI30K = HERE.parent.parent / "shared" / "data" / "multi30k"
V, D, H, F, L = 8000, 256, 4, 1024, 3
B, S, T = 160, 25, 25
STEPS, WARM = 8, 3
DEC_B, DEC_LEN, BEAM = 32, 30, 5
THREADS = 2


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def random_batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randint(4, V, (B, S), generator=generator), torch.randint(4, V, (B, T), generator=generator)


def timed(step, steps: int = STEPS, warm: int = WARM) -> float:  # type: ignore[no-untyped-def]
    """Seconds per call of ``step`` over ``steps`` calls after ``warm`` untimed ones."""
    for _ in range(warm):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def matmul_peak() -> dict:
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    seconds = timed(lambda: a @ b, steps=10, warm=2)
    return {"gflops": 2 * 2048**3 / seconds / 1e9}


def training_flops_per_step() -> float:
    """Matmul FLOPs of one training step (forward x 3): projections, FFN, attention scores/values, output layer."""
    per_layer_token = 2 * (4 * D * D + 2 * D * F)  # QKV + out, FFN (encoder layer)
    encoder = B * S * L * (per_layer_token + 2 * 2 * S * D)
    decoder_token = 2 * (8 * D * D + 2 * D * F)  # self QKV+out, cross Q+KV+out, FFN
    decoder = B * T * L * (decoder_token + 2 * 2 * T * D + 2 * 2 * S * D)
    output = B * T * 2 * D * V
    return 3.0 * (encoder + decoder + output)


def ordo_model():  # type: ignore[no-untyped-def]
    from ordo.build import build_model
    from ordo.config import load_config

    cfg = load_config(None, ["model.preset=small", "model.dropout=0.1", "model.share_embeddings=all"]).model
    torch.manual_seed(0)
    return build_model(cfg, V, V).model


def ordo_train() -> dict:
    from ordo.config import TrainConfig
    from ordo.data.batch import Batch
    from ordo.gemm import cpu_gemm
    from ordo.losses import output_nll
    from ordo.training.optim import build_optimizer

    model = ordo_model().train()
    src, tgt = random_batch()
    tgt_in = torch.cat([torch.full((B, 1), 2), tgt[:, :-1]], 1)
    batch = Batch(src, torch.full((B,), S), torch.arange(B), tgt_in, tgt)
    optimizer = build_optimizer(model, TrainConfig(warmup_init_lr=1e-4, adam_betas=(0.9, 0.98), adam_eps=1e-9))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        output = model(batch)
        loss = output_nll(output.hidden, output.project, batch.tgt_out, 0.1)[0] / (B * T)
        loss.backward()
        optimizer.step()

    with cpu_gemm(TrainConfig().cpu_gemm):  # the default setting, as ordo train runs it
        seconds = timed(step)
    return {"tok_per_s": B * T / seconds, "gflops": training_flops_per_step() / seconds / 1e9,
            "params": sum(p.numel() for p in model.parameters())}


def ordo_decode(beam: int, int8: bool = False) -> dict:
    from ordo.config import DecodeConfig
    from ordo.data.batch import Batch
    from ordo.decoding.quantize import quantize_int8
    from ordo.decoding.search import beam_search, greedy_search
    from ordo.gemm import cpu_gemm

    model = ordo_model().eval()
    if int8:
        model = quantize_int8(model)
    src = random_batch()[0][:DEC_B]
    batch = Batch(src, torch.full((DEC_B,), S), torch.arange(DEC_B))
    limits = {"max_len_a": 0.0, "max_len_b": DEC_LEN - 1, "min_len": DEC_LEN - 1}  # 29 tokens + EOS: 30 steps
    with cpu_gemm(DecodeConfig().cpu_gemm):  # the default setting, as ordo translate runs it
        if beam == 1:
            seconds = timed(lambda: greedy_search(model, batch, **limits), steps=2, warm=1)
        else:
            seconds = timed(lambda: beam_search(model, batch, beam, **limits), steps=2, warm=1)
    return {"sent_per_s": DEC_B / seconds}


def marian_model():  # type: ignore[no-untyped-def]
    from transformers import MarianConfig, MarianMTModel

    cfg = MarianConfig(vocab_size=V, d_model=D, encoder_layers=L, decoder_layers=L, encoder_attention_heads=H,
                       decoder_attention_heads=H, encoder_ffn_dim=F, decoder_ffn_dim=F, max_position_embeddings=256,
                       pad_token_id=1, eos_token_id=2, decoder_start_token_id=1, dropout=0.1, scale_embedding=True)
    torch.manual_seed(0)
    return MarianMTModel(cfg)


def marian_train() -> dict:
    from transformers.models.marian.modeling_marian import shift_tokens_right

    model = marian_model().train()
    src, tgt = random_batch()
    decoder_inputs = shift_tokens_right(tgt, 1, 1)  # what Marian does with labels=, without its own loss
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def step() -> None:
        optimizer.zero_grad()
        logits = model(input_ids=src, decoder_input_ids=decoder_inputs).logits  # no labels: no second loss
        loss = torch.nn.functional.cross_entropy(logits.view(-1, V), tgt.reshape(-1), label_smoothing=0.1)
        loss.backward()
        optimizer.step()

    return {"tok_per_s": B * T / timed(step)}


def marian_decode(beam: int) -> dict:
    model = marian_model().eval()
    src = random_batch()[0][:DEC_B]
    options = {"num_beams": beam, "min_new_tokens": DEC_LEN, "max_new_tokens": DEC_LEN, "early_stopping": False,
               "do_sample": False}
    with torch.inference_mode():
        seconds = timed(lambda: model.generate(input_ids=src, **options), steps=2, warm=1)
    return {"sent_per_s": DEC_B / seconds}


def ct2_decode(beam: int, compute_type: str) -> dict:
    """CTranslate2 translating ordo's exported weights (same random init as ordo_decode)."""
    import ctranslate2

    from ordo.api import LoadedRun
    from ordo.config import build_config
    from ordo.export import ctranslate2_spec

    with tempfile.TemporaryDirectory() as tmp:
        vocab = _NumberedVocab()
        run = LoadedRun(ordo_model().eval(), build_config({"model": {"preset": "small"}}), vocab, vocab,
                        torch.device("cpu"))
        spec = ctranslate2_spec(run)
        spec.validate()
        spec.optimize()
        (Path(tmp) / "ct2").mkdir()
        spec.save(str(Path(tmp) / "ct2"))
        translator = ctranslate2.Translator(str(Path(tmp) / "ct2"), device="cpu", compute_type=compute_type,
                                            inter_threads=1, intra_threads=THREADS)
        src = random_batch()[0][:DEC_B]
        tokens = [[vocab.all_pieces()[i] for i in row] for row in src.tolist()]
        options = {"beam_size": beam, "min_decoding_length": DEC_LEN, "max_decoding_length": DEC_LEN}
        seconds = timed(lambda: translator.translate_batch(tokens, **options), steps=2, warm=1)
    return {"sent_per_s": DEC_B / seconds}


class _NumberedVocab:
    """A stand-in vocabulary of V pieces for the random-token benchmark (ids 0-3 are the special pieces)."""

    def __init__(self) -> None:
        self.names = ["<pad>", "<unk>", "<s>", "</s>", *(f"w{i}" for i in range(4, V))]

    def all_pieces(self) -> list[str]:
        return self.names


MEASUREMENTS = {
    "peak": matmul_peak,
    "ordo-train": ordo_train,
    "ordo-greedy": lambda: ordo_decode(1),
    "ordo-beam5": lambda: ordo_decode(BEAM),
    "ordo-greedy-int8": lambda: ordo_decode(1, int8=True),
    "ordo-beam5-int8": lambda: ordo_decode(BEAM, int8=True),
    "marian-train": marian_train,
    "marian-greedy": lambda: marian_decode(1),
    "marian-beam5": lambda: marian_decode(BEAM),
    "ct2-greedy-fp32": lambda: ct2_decode(1, "float32"),
    "ct2-beam5-fp32": lambda: ct2_decode(BEAM, "float32"),
    "ct2-beam5-int8": lambda: ct2_decode(BEAM, "int8"),
}


def run_one(name: str) -> None:
    torch.set_num_threads(THREADS)
    result = MEASUREMENTS[name]()
    result["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--one", choices=list(MEASUREMENTS), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "peers.md")
    parser.add_argument("--rounds", type=int, default=3,
                        help="run every measurement this many times, in turn, and keep the medians (drift on a shared "
                             "host then hits ordo and the peers alike)")
    parser.add_argument("--no-real", action="store_true", help="skip the real-corpus translation rows")
    parser.add_argument("--no-synthetic", action="store_true", help="only the real-corpus rows")
    parser.add_argument("--real-run", type=Path, help="a trained Multi30k run to translate with (default: train one)")
    parser.add_argument("--real-checkpoint", default="averaged", help="its checkpoint (default: %(default)s)")
    parser.add_argument("--real-data", type=Path, default=MULTI30K, help="Multi30k's folder (default: %(default)s)")
    parser.add_argument("--real-updates", type=int, default=1000,
                        help="updates of the model trained here (fewer leave many outputs running to the length limit)")
    parser.add_argument("--real-work", type=Path, default=HERE / "out" / "real_multi30k")
    parser.add_argument("--real-out", type=Path, default=HERE / "results" / "peers_real.md")
    args = parser.parse_args()
    if args.one:
        run_one(args.one)
        return
    if not args.no_real:
        print("\n".join(real_corpus_report(args)), end="\n\n")
    if args.no_synthetic:
        return
    rounds: dict[str, list[dict]] = {name: [] for name in MEASUREMENTS}
    for round_index in range(args.rounds):
        for name in MEASUREMENTS:
            rounds[name].append(measure_in_subprocess(name))
            print(f"round {round_index + 1}", name, rounds[name][-1], file=sys.stderr)
    report({name: median_result(runs) for name, runs in rounds.items()}, args.out, args.rounds)


def ordo_command(*arguments: str) -> None:
    """Run the ``ordo`` CLI of this interpreter; its output goes to stderr, a failure raises."""
    subprocess.run([sys.executable, "-m", "ordo", *arguments], stdout=sys.stderr, check=True)


def real_corpus_model(args: argparse.Namespace) -> tuple[Path, str, Path]:
    """(run, checkpoint, data folder) for the real-corpus rows: ``--real-run``, or the Multi30k recipe's model
    trained for ``--real-updates`` updates under ``--real-work`` (prepared and trained once, reused later)."""
    recipe, work = HERE.parent / "recipes" / "multi30k", args.real_work
    data = work / "data"
    if not (data / "data.yaml").exists():
        sides = {f"--{split}-{side}": str(args.real_data / f"{name}.{lang}.gz")
                 for split, name in (("train", "train"), ("valid", "valid"), ("test", "test2016"))
                 for side, lang in (("src", "en"), ("tgt", "de"))}
        ordo_command("prepare", str(recipe / "prepare.yaml"), "--out", str(data),
                     *(item for pair in sides.items() for item in pair))
    if args.real_run is not None:
        return args.real_run, args.real_checkpoint, data
    run = work / "run"  # a later --real-updates resumes it
    if not (run / "checkpoints" / f"step_{args.real_updates}.pt").exists():
        ordo_command("train", str(recipe / "train.yaml"), "--data", str(data), "--out", str(run), "--set",
                     f"train.max_steps={args.real_updates}", "--set", f"train.valid_every={args.real_updates}")
    return run, "last", data


def real_corpus_report(args: argparse.Namespace) -> list[str]:
    """The real-corpus summary: bench/decode_real.py's medians on Multi30k test2016, also written at the top of
    its report (``--real-out``)."""
    if not (args.real_data / "test2016.en.gz").exists():
        return [f"Real corpus: skipped, no Multi30k at {args.real_data} (--real-data DIR)."]
    run, checkpoint, data = real_corpus_model(args)
    summary_path = args.real_work / "decode_real.json"
    command = ["bench/decode_real.py", "--model", shown(run), "--checkpoint", checkpoint, "--src",
               shown(data / "test.src.txt"), "--ref", shown(data / "test.tgt.txt"), "--rounds", str(args.rounds),
               "--small", "100", "--profile-sentences", "0", "--out", shown(args.real_out), "--json-out",
               shown(summary_path)]
    subprocess.run([sys.executable, *command], cwd=HERE.parent, stdout=sys.stderr, check=True)
    figures = json.loads(summary_path.read_text())
    speeds, ratios = figures["sent_per_s"], figures["ratio"]
    title = (f"Real corpus, Multi30k test2016, beam 5, the model {shown(run)} ({checkpoint}): bench/peers.py ran "
             f"`python {' '.join(command)}` (its report below gives the model's BLEU and where outputs differ)")
    lines = [title, "",
             "| system | whole file sent/s | one at a time sent/s | / CTranslate2 (whole file, one at a time) |",
             "|---|---:|---:|---:|"]
    peers = dict(decode_real.PAIRS)  # ordo system -> the CTranslate2 system it is compared with
    for system, label in decode_real.SYSTEMS.items():
        cells = [_number(speeds[f"{system} {regime}"]) for regime in decode_real.REGIMES]
        ratio = " / ".join(_number(ratios[f"{system}/{peers[system]} {regime}"], "x{:.2f}")
                           for regime in decode_real.REGIMES) if system in peers else "-"
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio} |")
    full_report = args.real_out.read_text()
    with atomic_write(args.real_out) as handle:
        handle.write("\n".join([*lines, "", full_report]))
    return lines


def shown(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it (as the report shows commands)."""
    resolved = path.resolve()
    return str(resolved.relative_to(HERE.parent)) if resolved.is_relative_to(HERE.parent) else str(path)


def _number(value: float | None, form: str = "{:.1f}") -> str:
    return "-" if value is None else form.format(value)


def measure_in_subprocess(name: str) -> dict:
    """One measurement in a fresh process (clean peak memory): its figures, or ``{"error": ...}``."""
    done = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return json.loads(done.stdout.strip().splitlines()[-1])
    return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}


def median_result(runs: list[dict]) -> dict:
    """Median of each figure over the rounds that succeeded; the first error if none did."""
    good = [run for run in runs if "error" not in run]
    if not good:
        return runs[0]
    return {key: statistics.median(run[key] for run in good) for key in good[0]}


def _figure(results: dict, name: str, key: str) -> float | None:
    return results.get(name, {}).get(key)


def _ratio(results: dict, ours: str, theirs: str, key: str) -> str:
    """``xR`` with R = ours / theirs, or n/a when either is missing."""
    a, b = _figure(results, ours, key), _figure(results, theirs, key)
    return "n/a" if a is None or b is None else f"x{a / b:.2f}"


def _ratios(results: dict, ordo_beam: str) -> list[str]:
    """``train xA``, ``beam5 xB`` (ordo over MarianMTModel) and ``xC`` (``ordo_beam`` over CTranslate2 fp32)."""
    return [f"train {_ratio(results, 'ordo-train', 'marian-train', 'tok_per_s')}",
            f"beam5 {_ratio(results, ordo_beam, 'marian-beam5', 'sent_per_s')}",
            _ratio(results, ordo_beam, "ct2-beam5-fp32", "sent_per_s")]


def report(results: dict, out: Path, rounds: int) -> None:
    setting = f"torch {torch.__version__}, {THREADS} threads; medians of {rounds} rounds"
    lines = [f"command: `python bench/peers.py --rounds {rounds}` ({setting})", "", f"CPU: {cpu_description()}", "",
             "| system | train tgt tok/s | greedy sent/s | beam-5 sent/s | peak RSS MB (train / beam-5) |",
             "|---|---:|---:|---:|---:|"]
    rows = (("ordo", "ordo", ""), ("ordo int8", "ordo", "-int8"), ("transformers MarianMTModel", "marian", ""),
            ("CTranslate2 fp32", "ct2", "-fp32"))
    for system, prefix, suffix in rows:
        trains = suffix != "-int8"  # the int8 path is for translation only
        train = _figure(results, f"{prefix}-train", "tok_per_s") if trains else None
        greedy = _figure(results, f"{prefix}-greedy{suffix}", "sent_per_s")
        beam = _figure(results, f"{prefix}-beam5{suffix}", "sent_per_s")
        memory = [_figure(results, f"{prefix}-train", "peak_rss_mb") if trains else None,
                  _figure(results, f"{prefix}-beam5{suffix}", "peak_rss_mb")]
        cells = ["-" if v is None else f"{v:.1f}" for v in (train, greedy, beam)]
        lines.append(f"| {system} | {cells[0]} | {cells[1]} | {cells[2]} | "
                     f"{' / '.join('-' if m is None else f'{m:.0f}' for m in memory)} |")
    int8 = _figure(results, "ct2-beam5-int8", "sent_per_s")
    lines.append(f"| CTranslate2 int8 | - | - | {'-' if int8 is None else f'{int8:.1f}'} | - |")
    peak, achieved = _figure(results, "peak", "gflops"), _figure(results, "ordo-train", "gflops")
    if peak and achieved:
        share = 100 * achieved / peak
        flops = f"ordo training: {achieved:.1f} GFLOP/s of matmul work, {share:.0f}% of the {peak:.1f} GFLOP/s peak."
        lines += ["", flops]
    errors = [f"- {name}: {r['error']}" for name, r in results.items() if "error" in r]
    if errors:
        lines += ["", "failed:", *errors]
    fp32 = _ratios(results, "ordo-beam5")
    int8_ct2 = _ratio(results, "ordo-beam5-int8", "ct2-beam5-int8", "sent_per_s")
    summary = (f"float32 ordo: {fp32[1]} {fp32[2]}; int8 ordo over CTranslate2 int8: {int8_ct2}\n"
               + " ".join(_ratios(results, "ordo-beam5-int8")))
    text = "\n".join(lines) + "\n\n" + summary + "\n"
    with atomic_write(out) as handle:
        handle.write(text)
    print(text.rstrip())


if __name__ == "__main__":
    main()
