"""ordo on one CUDA GPU against transformers ``MarianMTModel``, on identical work, in one run.

Shape: ordo's ``base`` preset (d_model 512, 8 heads, FFN 2048, 6+6 layers, post-norm), joint vocabulary
``--vocab`` (default 32,000), shared embeddings, dropout 0.1, label smoothing 0.1, fused Adam; random sentence
pairs of 25 tokens. Figures:

- training target tokens/s under bf16 autocast (ordo's ``train.amp`` default on CUDA), at ``--train-batches``
  sentences per batch (20 timed steps after 5 warm-up steps), with the matmul FLOP/s achieved: against the bf16
  peak measured in the same run (8192³ products) and against the H100 SXM's rated 989 dense bf16 TFLOP/s
  (``RATED_TFLOPS``; on another GPU only the measured share means something);
  ordo in float32 for reference;
- greedy and beam-5 translation, exactly 30 output tokens per sentence, sentences/s at ``--decode-batches``
  sentences per batch, float32 and bf16 autocast for both toolkits;
- bf16 against float32 on the same (random) weights: the relative error of the decoder states and logits;
- peak GPU memory of each measurement (``torch.cuda.max_memory_allocated``).

usage: python bench/gpu/peers.py [--out bench/results/gpu.md] [--vocab 32000] [--train-batches 160,1000] [--decode-batches 32,256]
The last line printed reads ``train xA beam5 xB`` (ordo over MarianMTModel, bf16, the largest batches).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from ordo.data.textio import atomic_write

D, H, FFN, L = 512, 8, 2048, 6
S = T = 25
STEPS, WARM = 20, 5
DEC_LEN, BEAM = 30, 5
RATED_TFLOPS = 989.4  # H100 SXM, dense bf16 (NVIDIA's data sheet)
DEVICE = torch.device("cuda")


def timed(step: Callable[[], object], steps: int = STEPS, warm: int = WARM) -> float:
    """Seconds per call of ``step`` (GPU work included) over ``steps`` calls after ``warm`` untimed ones."""
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps


def measured(work: Callable[[], dict]) -> dict:
    """``work``'s figures with the peak GPU memory it allocated, in MB."""
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    result = work()
    result["peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return result


def matmul_peak() -> dict:
    """bf16 TFLOP/s of 8192³ matrix products."""
    a = torch.randn(8192, 8192, device=DEVICE, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=DEVICE, dtype=torch.bfloat16)
    return {"tflops": 2 * 8192**3 / timed(lambda: a @ b, steps=10, warm=3) / 1e12}


def training_flops_per_step(batch: int, vocab: int) -> float:
    """Matmul FLOPs of one training step (forward x 3): projections, FFN, attention scores/values, output layer."""
    encoder = batch * S * L * (2 * (4 * D * D + 2 * D * FFN) + 2 * 2 * S * D)
    decoder = batch * T * L * (2 * (8 * D * D + 2 * D * FFN) + 2 * 2 * T * D + 2 * 2 * S * D)
    return 3.0 * (encoder + decoder + batch * T * 2 * D * vocab)


def random_batch(batch: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, vocab, (batch, S), generator=generator)
    return src.to(DEVICE), torch.randint(4, vocab, (batch, T), generator=generator).to(DEVICE)


def amp(dtype: torch.dtype | None):  # type: ignore[no-untyped-def]
    from ordo.precision import autocast

    return autocast(dtype, DEVICE)


def ordo_model(vocab: int) -> torch.nn.Module:
    from ordo.build import build_model
    from ordo.config import load_config

    cfg = load_config(None, ["model.preset=base", "model.share_embeddings=all"]).model
    torch.manual_seed(0)
    return build_model(cfg, vocab, vocab).model.to(DEVICE)


def ordo_batch(src: torch.Tensor, tgt: torch.Tensor | None = None):  # type: ignore[no-untyped-def]
    from ordo.data.batch import Batch

    lengths = torch.full((src.size(0),), src.size(1), device=DEVICE)
    if tgt is None:
        return Batch(src, lengths, torch.arange(src.size(0), device=DEVICE))
    tgt_in = torch.cat([torch.full_like(tgt[:, :1], 2), tgt[:, :-1]], 1)
    return Batch(src, lengths, torch.arange(src.size(0), device=DEVICE), tgt_in, tgt)


def ordo_train(batch: int, vocab: int, dtype: torch.dtype | None) -> dict:
    from ordo.config import TrainConfig
    from ordo.losses import output_nll
    from ordo.training.optim import build_optimizer

    model = ordo_model(vocab).train()
    data = ordo_batch(*random_batch(batch, vocab))
    optimizer = build_optimizer(model, TrainConfig(warmup_init_lr=1e-4, adam_betas=(0.9, 0.98), adam_eps=1e-9))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with amp(dtype):
            output = model(data)
            loss = output_nll(output.hidden, output.project, data.tgt_out, 0.1)[0] / (batch * T)
        loss.backward()
        optimizer.step()

    seconds = timed(step)
    return {"tok_per_s": batch * T / seconds, "tflops": training_flops_per_step(batch, vocab) / seconds / 1e12}


def ordo_decode(batch: int, vocab: int, beam: int, dtype: torch.dtype | None) -> dict:
    from ordo.decoding.search import beam_search, greedy_search

    model = ordo_model(vocab).eval()
    data = ordo_batch(random_batch(batch, vocab)[0])
    limits = {"max_len_a": 0.0, "max_len_b": DEC_LEN - 1, "min_len": DEC_LEN - 1}  # 29 tokens + EOS: 30 steps

    def search() -> object:
        with torch.inference_mode(), amp(dtype):
            if beam == 1:
                return greedy_search(model, data, **limits)
            return beam_search(model, data, beam, **limits)

    return {"sent_per_s": batch / timed(search, steps=3, warm=1)}


def marian_model(vocab: int) -> torch.nn.Module:
    from transformers import MarianConfig, MarianMTModel

    cfg = MarianConfig(vocab_size=vocab, d_model=D, encoder_layers=L, decoder_layers=L, encoder_attention_heads=H,
                       decoder_attention_heads=H, encoder_ffn_dim=FFN, decoder_ffn_dim=FFN,
                       max_position_embeddings=256, pad_token_id=1, eos_token_id=2, decoder_start_token_id=1,
                       dropout=0.1, scale_embedding=True)
    torch.manual_seed(0)
    return MarianMTModel(cfg).to(DEVICE)


def marian_train(batch: int, vocab: int, dtype: torch.dtype | None) -> dict:
    from transformers.models.marian.modeling_marian import shift_tokens_right

    model = marian_model(vocab).train()
    src, tgt = random_batch(batch, vocab)
    decoder_inputs = shift_tokens_right(tgt, 1, 1)  # what Marian does with labels=, without its own loss
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with amp(dtype):
            logits = model(input_ids=src, decoder_input_ids=decoder_inputs).logits  # no labels: no second loss
            loss = F.cross_entropy(logits.view(-1, vocab).float(), tgt.reshape(-1), label_smoothing=0.1)
        loss.backward()
        optimizer.step()

    return {"tok_per_s": batch * T / timed(step)}


def marian_decode(batch: int, vocab: int, beam: int, dtype: torch.dtype | None) -> dict:
    model = marian_model(vocab).eval()
    src = random_batch(batch, vocab)[0]
    options = {"num_beams": beam, "min_new_tokens": DEC_LEN, "max_new_tokens": DEC_LEN, "early_stopping": False,
               "do_sample": False}

    def generate() -> object:
        with torch.inference_mode(), amp(dtype):
            return model.generate(input_ids=src, **options)

    return {"sent_per_s": batch / timed(generate, steps=3, warm=1)}


def bf16_error(vocab: int) -> dict:
    """Relative max error of bf16 autocast against float32, same weights and batch (encoder states, logits)."""
    model = ordo_model(vocab).eval()
    data = ordo_batch(*random_batch(64, vocab))
    with torch.inference_mode():
        reference = model(data)
        pairs = {"decoder_states": [reference.hidden], "logits": [reference.logits]}
        with amp(torch.bfloat16):
            low = model(data)
            pairs["decoder_states"].append(low.hidden)
            pairs["logits"].append(low.logits)
    figures = {}
    for name, (ref, out) in pairs.items():
        figures[f"{name}_rel_error"] = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        figures[f"{name}_argmax_agree"] = (out.argmax(-1) == ref.argmax(-1)).float().mean().item()
    return figures


def run_all(vocab: int, train_batches: list[int], decode_batches: list[int]) -> dict[str, dict]:
    bf16 = torch.bfloat16
    plan: dict[str, Callable[[], dict]] = {"peak": matmul_peak, "bf16-error": lambda: bf16_error(vocab)}
    for b in train_batches:
        plan[f"ordo-train-bf16-{b}"] = lambda b=b: ordo_train(b, vocab, bf16)
        plan[f"marian-train-bf16-{b}"] = lambda b=b: marian_train(b, vocab, bf16)
        plan[f"ordo-train-fp32-{b}"] = lambda b=b: ordo_train(b, vocab, None)
    for b in decode_batches:
        for beam in (1, BEAM):
            for name, dtype in (("fp32", None), ("bf16", bf16)):
                plan[f"ordo-beam{beam}-{name}-{b}"] = lambda b=b, beam=beam, dtype=dtype: ordo_decode(b, vocab, beam, dtype)
                plan[f"marian-beam{beam}-{name}-{b}"] = (
                    lambda b=b, beam=beam, dtype=dtype: marian_decode(b, vocab, beam, dtype))
    results = {}
    for name, work in plan.items():
        try:
            results[name] = measured(work)
        except Exception as err:  # noqa: BLE001 - a failed measurement is reported, the others still run
            results[name] = {"error": f"{type(err).__name__}: {err}"}
        print(name, json.dumps(results[name]), file=sys.stderr, flush=True)
    return results


def _cell(results: dict, name: str, key: str, digits: int = 0) -> str:
    value = results.get(name, {}).get(key)
    return "-" if value is None else f"{value:,.{digits}f}"


def _ratio(results: dict, ours: str, theirs: str, key: str) -> str:
    a, b = results.get(ours, {}).get(key), results.get(theirs, {}).get(key)
    return "n/a" if a is None or b is None else f"x{a / b:.2f}"


def report(results: dict, args: argparse.Namespace, command: str) -> str:
    gpu = torch.cuda.get_device_name()
    peak = results.get("peak", {}).get("tflops")
    lines = [f"command: `{command}`", "",
             (f"{gpu}, torch {torch.__version__}, CUDA {torch.version.cuda}; measured bf16 matmul peak "
             f"{_cell(results, 'peak', 'tflops')} TFLOP/s (8192³); vocabulary {args.vocab:,}"), "",
             ("| training, batch of sentences x 25 tokens | ordo bf16 tok/s | MarianMTModel bf16 tok/s | ratio | "
             "ordo TFLOP/s (share of measured / rated peak) | ordo fp32 tok/s | peak MB ordo / Marian |"),
             "|---|---:|---:|---:|---:|---:|---:|"]
    for b in args.train_batches:
        ours, theirs = f"ordo-train-bf16-{b}", f"marian-train-bf16-{b}"
        tflops = results.get(ours, {}).get("tflops")
        share = "-" if tflops is None or not peak else (
            f"{tflops:.0f} ({100 * tflops / peak:.0f}% / {100 * tflops / RATED_TFLOPS:.0f}%)")
        lines.append(f"| {b} | {_cell(results, ours, 'tok_per_s')} | {_cell(results, theirs, 'tok_per_s')} | "
                     f"{_ratio(results, ours, theirs, 'tok_per_s')} | {share} | "
                     f"{_cell(results, f'ordo-train-fp32-{b}', 'tok_per_s')} | "
                     f"{_cell(results, ours, 'peak_mb')} / {_cell(results, theirs, 'peak_mb')} |")
    lines += ["", ("| translation, 30 output tokens | ordo sent/s | MarianMTModel `generate` sent/s | ratio | "
              "peak MB ordo / Marian |"), "|---|---:|---:|---:|---:|"]
    for b in args.decode_batches:
        for beam in (1, BEAM):
            for name in ("fp32", "bf16"):
                ours, theirs = f"ordo-beam{beam}-{name}-{b}", f"marian-beam{beam}-{name}-{b}"
                search = "greedy" if beam == 1 else f"beam {beam}"
                lines.append(f"| {search}, {name}, {b} sentences | {_cell(results, ours, 'sent_per_s')} | "
                             f"{_cell(results, theirs, 'sent_per_s')} | {_ratio(results, ours, theirs, 'sent_per_s')} | "
                             f"{_cell(results, ours, 'peak_mb')} / {_cell(results, theirs, 'peak_mb')} |")
    error = results.get("bf16-error", {})
    if "logits_rel_error" in error:
        lines += ["", (f"bf16 autocast against float32, same random weights, 64 x 25 tokens: logits max error "
                  f"{100 * error['logits_rel_error']:.2f}% of the largest logit, decoder states "
                  f"{100 * error['decoder_states_rel_error']:.2f}%; arg max of the logits agrees at "
                  f"{100 * error['logits_argmax_agree']:.1f}% of positions.")]
    failed = [f"- {name}: {r['error']}" for name, r in results.items() if "error" in r]
    if failed:
        lines += ["", "failed:", *failed]
    b_train, b_decode = args.train_batches[-1], (args.decode_batches or [0])[-1]
    summary = (f"train {_ratio(results, f'ordo-train-bf16-{b_train}', f'marian-train-bf16-{b_train}', 'tok_per_s')} "
               f"beam5 {_ratio(results, f'ordo-beam5-bf16-{b_decode}', f'marian-beam5-bf16-{b_decode}', 'sent_per_s')}")
    return "\n".join(lines) + "\n\n" + summary + "\n"


def batches(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "gpu.md")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--train-batches", type=batches, default=[160, 1000])
    parser.add_argument("--decode-batches", type=batches, default=[32, 256])
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU")
    results = run_all(args.vocab, args.train_batches, args.decode_batches)
    text = report(results, args, "python bench/gpu/peers.py " + " ".join(sys.argv[1:]))
    with atomic_write(args.out) as handle:
        handle.write(text)
    print(text.rstrip())


if __name__ == "__main__":
    main()
