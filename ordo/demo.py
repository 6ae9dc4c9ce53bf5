"""``ordo demo``: the whole workflow on a synthetic SVO -> SOV language pair, on the CPU in a few minutes.

Generates the pair (:mod:`ordo.data.synthetic`), prepares it, trains a small Transformer for a fixed number of
updates (so the same seed gives the same result), translates the held-out test set and scores it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from ordo import api
from ordo.config import build_config
from ordo.data.prepare import PrepareConfig, prepare
from ordo.data.synthetic import write_corpus
from ordo.data.textio import atomic_write, read_lines
from ordo.evaluation.bleu import sacrebleu_bleu

logger = logging.getLogger("ordo.demo")

DEMO_MODEL = {"preset": "tiny", "d_model": 128, "ffn_dim": 512, "heads": 4, "encoder_layers": 2, "decoder_layers": 2}
# 1,050 updates of 2,000-token batches: about 78% of the tokens of the earlier 900 updates of 3,000, so that
# `make demo` fits in about 4 minutes on 2 cores, at a test BLEU about a point below that run's (bench/RESULTS.md)
DEMO_TRAIN = {
    "max_tokens": 2000, "lr": 2e-3, "warmup_steps": 300, "valid_every": 525, "valid_max_sentences": 200,
    "log_every": 100, "threads": 2, "keep_last": 2,
}


def demo_config(data_dir: Path, seed: int, max_steps: int) -> dict:
    """The demo's experiment config as a raw dict (printed so a user can rerun it with ``ordo train``)."""
    return {
        "data": str(data_dir),
        "model": dict(DEMO_MODEL),
        "train": {**DEMO_TRAIN, "seed": seed, "max_steps": max_steps},
        "decode": {"beam_size": 4},
    }


def run_demo(out: Path, minutes: float = 0.0, seed: int = 1, train_size: int = 20000, max_steps: int = 1050) -> float:
    """Run the demo in ``out`` and return test BLEU.

    Training stops after ``max_steps`` updates, so the same seed gives the same result on any machine;
    ``minutes`` > 0 adds a wall-time cap (and makes the result depend on the machine's speed).
    """
    api.setup_logging()
    started = time.perf_counter()
    raw = demo_config(out / "data", seed, max_steps)
    raw["train"]["max_minutes"] = minutes
    cfg = build_config(raw, "demo")  # a bad setting stops the demo before anything is written
    splits = write_corpus(out / "text", {"train": train_size, "valid": 300, "test": 300}, seed)
    prep = PrepareConfig(
        train_src=str(splits["train"][0]), train_tgt=str(splits["train"][1]),
        valid_src=str(splits["valid"][0]), valid_tgt=str(splits["valid"][1]),
        out=str(out / "data"), src_lang="svo", tgt_lang="sov", vocab_size=200, seed=seed,
    )
    prepare(prep, progress=False)
    api.train(cfg, out / "run")
    run = api.load_run(out / "run", "best", device="cpu")
    sources = read_lines(splits["test"][0])
    references = read_lines(splits["test"][1])
    hypotheses = run.translate(sources)
    with atomic_write(out / "test.hyp") as handle:
        handle.writelines(h + "\n" for h in hypotheses)
    bleu = sacrebleu_bleu(hypotheses, references, warn_tokenized=False)  # the pair's text is tokenized
    for src, ref, hyp in list(zip(sources, references, hypotheses))[:4]:
        print(f"\n  source:    {src}\n  reference: {ref}\n  ordo:      {hyp}")
    print(f"\ntest BLEU {bleu:.2f} on {len(sources)} held-out sentences "
          f"(total {time.perf_counter() - started:.0f} s; outputs in {out})")
    return bleu
