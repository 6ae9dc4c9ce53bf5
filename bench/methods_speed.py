"""Training and beam-decoding cost of each method over the baseline, measured side by side in one process.

Shape (the speed issue's): d_model 256, 4 heads, FFN 1024, 3+3 layers, joint vocabulary 8000, shared
embeddings, dropout 0.1, label smoothing 0.1, Adam; batches of 160 sentence pairs of 25 tokens; 2 threads.
Training: full steps (forward, label-smoothed CE plus the method's auxiliary losses, backward, Adam) on random
tokens. Decoding: the incremental-decoding work of beam 5 over 30 output tokens for 160 sentences (encode the
160 sentences once, repeat each one's state for its 5 beam rows as beam search does (sharing the source side
where the model allows), then 30 decode steps over 800 rows with a beam reorder of the state after each step). Systems are timed in
interleaved rounds and the median is kept, so drift on the machine affects all of them alike.

Ratios are against the first system named: run the Transformer methods and the RNN ones separately, e.g.
``--systems rnnsearch,rnn_s_distortion,rnn_t_distortion,rnn_h_distortion --out bench/results/rnn_speed.md``.
Systems named ``lattice*`` (paper 002) train and decode on lattice sources of about 1.8 times the baseline's
edges with the same targets: ``--systems baseline,lattice,lattice_lpe,lattice_lsa,lattice_lpe_lsa
--out bench/results/lattice_speed.md`` gives their cost against the 1-best baseline in target tokens/s.

usage: python bench/methods_speed.py [--rounds 5] [--steps 3] [--systems baseline,future_cost_2,...] [--out F]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

if not __package__:  # run as `python bench/NAME.py`: the repository root, not bench/, first on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.lattice_relations import random_lattices
from ordo.build import build_model, count_parameters
from ordo.config import load_config
from ordo.data.batch import Batch
from ordo.data.batching import collate
from ordo.data.lattice.graph import FIELD_END, FIELD_START
from ordo.data.textio import atomic_write
from ordo.losses import output_nll

SYSTEMS = {
    "baseline": [],
    "additional_pe": ["model.methods.additional_pe={}"],
    "relative_pe": ["model.methods.relative_pe.clip=16"],
    "reorder_emb_encoder": ["model.methods.reorder_emb.variant=encoder"],
    "reorder_emb_decoder": ["model.methods.reorder_emb.variant=decoder"],
    "reorder_emb_both": ["model.methods.reorder_emb.variant=both"],
    "exgre": ["model.methods.exgre.weight=0.6"],
    "refsr": ["model.methods.refsr.weight=0.6"],
    "future_cost_1": ["model.methods.future_cost.model=1"],
    "future_cost_2": ["model.methods.future_cost.model=2"],
    "future_cost_1_sampled": ["model.methods.future_cost.model=1", "model.methods.future_cost.sample_fraction=0.1"],
    "future_cost_2_sampled": ["model.methods.future_cost.model=2", "model.methods.future_cost.sample_fraction=0.1"],
    "future_cost_1_sampled20": ["model.methods.future_cost.model=1", "model.methods.future_cost.sample_fraction=0.2"],
    "future_cost_2_sampled20": ["model.methods.future_cost.model=2", "model.methods.future_cost.sample_fraction=0.2"],
    "lattice": [],  # systems named lattice* train on lattice sources (make_lattice_batch)
    "lattice_lpe": ["model.methods.lattice_pe={}"],
    "lattice_lsa": ["model.methods.lattice_attn={}"],
    "lattice_lpe_lsa": ["model.methods.lattice_pe={}", "model.methods.lattice_attn={}"],
    "rnnsearch": ["model.preset=rnn-small"],
    "rnn_s_distortion": ["model.preset=rnn-small", "model.methods.distortion.context=source"],
    "rnn_t_distortion": ["model.preset=rnn-small", "model.methods.distortion.context=target"],
    "rnn_h_distortion": ["model.preset=rnn-small", "model.methods.distortion.context=hidden"],
}
TRANSFORMER_SYSTEMS = [name for name in SYSTEMS if not name.startswith(("rnn", "lattice"))]
VOCAB, BATCH, LENGTH, BEAM, OUT_TOKENS = 8000, 160, 25, 5, 30


def write_report(lines: list[str], out: Path) -> None:
    """Write a benchmark's Markdown report atomically and print it."""
    text = "\n".join(lines) + "\n"
    with atomic_write(out) as handle:
        handle.write(text)
    print(text)


def make_model(overrides: list[str]) -> tuple[torch.nn.Module, list]:
    cfg = load_config(None, ["model.preset=small", "model.dropout=0.1", *overrides]).model
    torch.manual_seed(0)
    built = build_model(cfg, VOCAB, VOCAB)
    return built.model, built.losses


def make_batch() -> Batch:
    generator = torch.Generator().manual_seed(1)
    src = torch.randint(4, VOCAB, (BATCH, LENGTH), generator=generator)
    tgt = torch.randint(4, VOCAB, (BATCH, LENGTH), generator=generator)
    positions = torch.stack([torch.randperm(LENGTH, generator=generator) + 1 for _ in range(BATCH)])
    positions[:, -1] = 0  # the EOS slot
    return Batch(src, torch.full((BATCH,), LENGTH), torch.arange(BATCH), tgt, tgt.clone(),
                 {"reorder_positions": positions})


def make_lattice_batch(batch: Batch) -> Batch:
    """``batch``'s targets with lattice sources (paper 002): per sentence, 3 segmentations (characters and two
    word-like ones of mean length 1.5) of 1.5 x LENGTH characters, so about 1.8 x LENGTH edges, near the ratio
    of the IWSLT17 Zh lattices to their jieba 1-best (44.6 edges against 21.7 words per sentence). All lattices
    have the same number of edges (the most common one among many drawn), as all baseline sentences have the
    same length, so padding counts against neither."""
    drawn = random_lattices(int(1.5 * LENGTH), (1.0, 1.5, 1.5), 40 * BATCH, seed=3, spread=0.0)
    edges = Counter(len(lattice) for lattice in drawn).most_common(1)[0][0]
    lattices = [lattice for lattice in drawn if len(lattice) == edges][:BATCH]
    generator = torch.Generator().manual_seed(4)
    rows = [torch.randint(4, VOCAB, (len(lattice),), generator=generator).numpy() for lattice in lattices]
    spans = {FIELD_START: [np.asarray(lat.starts) for lat in lattices],
             FIELD_END: [np.asarray(lat.ends) for lat in lattices]}
    source = collate(np.arange(BATCH), rows, field_rows=spans)
    return Batch(source.src_tokens, source.src_lengths, source.ids, batch.tgt_in, batch.tgt_out, source.fields)


def time_training(model: torch.nn.Module, losses: list, batch: Batch, steps: int) -> float:
    """Target tokens per second over ``steps`` full training steps."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    model.train()
    start = time.perf_counter()
    for _ in range(steps):
        output = model(batch)
        loss = output_nll(output.hidden, output.project, batch.tgt_out, 0.1)[0] / batch.num_tgt_tokens
        for aux in losses:
            loss = loss + aux.weight * aux.compute(output, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return steps * batch.num_tgt_tokens / (time.perf_counter() - start)


@torch.inference_mode()
def time_decoding(model: torch.nn.Module, batch: Batch) -> float:
    """Sentences per second of beam-5-shaped incremental decoding of 30 tokens."""
    model.eval()
    rows = BATCH * BEAM
    generator = torch.Generator().manual_seed(2)
    start = time.perf_counter()
    state = model.init_state(model.encode(batch))
    state.repeat_rows(BEAM)  # BEAM rows per sentence, sharing its source side where the model can, as beam_search
    tokens = torch.full((rows,), 2)
    for _ in range(OUT_TOKENS):
        logits = model.decode_step(tokens, state)
        tokens = logits.argmax(-1)
        keep = (torch.arange(rows) // BEAM) * BEAM + torch.randint(0, BEAM, (rows,), generator=generator)
        state.reorder(keep, same_sources=True)  # within each sentence, as beam_search reorders
        tokens = tokens[keep]
    return BATCH / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="training steps per timing")
    parser.add_argument("--systems", default=",".join(TRANSFORMER_SYSTEMS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "methods_speed.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    names = args.systems.split(",")
    models = {name: make_model(SYSTEMS[name]) for name in names}
    plain = make_batch()
    lattice = make_lattice_batch(plain) if any(name.startswith("lattice") for name in names) else plain
    batches = {name: lattice if name.startswith("lattice") else plain for name in names}
    train: dict[str, list[float]] = {name: [] for name in names}
    decode: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # warm-up
        time_training(*models[name], batches[name], 1)
        time_decoding(models[name][0], batches[name])
    for round_index in range(args.rounds):
        for name in names:
            train[name].append(time_training(*models[name], batches[name], args.steps))
            decode[name].append(time_decoding(models[name][0], batches[name]))
        print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)
    base_train, base_decode = statistics.median(train[names[0]]), statistics.median(decode[names[0]])
    lines = [
        f"command: `python bench/methods_speed.py --rounds {args.rounds} --steps {args.steps} --systems {args.systems}`",
        f"torch {torch.__version__}, {args.threads} threads; medians of {args.rounds} interleaved rounds", "",
        "| system | parameters | train tgt tok/s | vs baseline | beam-5 sent/s | vs baseline |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        t, d = statistics.median(train[name]), statistics.median(decode[name])
        lines.append(f"| {name} | {count_parameters(models[name][0]):,} | {t:.0f} | {t / base_train:.3f} | "
                     f"{d:.1f} | {d / base_decode:.3f} |")
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
