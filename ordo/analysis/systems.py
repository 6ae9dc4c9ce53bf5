"""Comparison tables of trained systems on one test set, as the papers' tables report them
(docs/methods.md, "The papers' analyses"):
BLEU, sign-test p-value against the baseline, parameters, training and translation speed."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ordo.api import LoadedRun, load_run
from ordo.build import count_parameters
from ordo.checkpoint import load_checkpoint, step_checkpoints
from ordo.evaluation.bleu import corpus_scores
from ordo.evaluation.seeds import bleu_metric as seed_bleu_metric
from ordo.evaluation.significance import sign_test

Metric = Callable[[list[str], list[str]], float]


def bleu_metric(tokenized: bool) -> Metric:
    """Corpus BLEU: multi-bleu.perl's on whitespace tokens when ``tokenized``, else sacreBLEU's."""
    return seed_bleu_metric(tokenized).score


@dataclass
class TrainingFigures:
    """What the last checkpoint of a run says about its training."""

    updates: int
    minutes: float
    src_tokens_per_second: float | None  # None for runs saved before token totals were kept
    tgt_tokens_per_second: float | None


def training_figures(run_dir: Path) -> TrainingFigures:
    """Updates, wall minutes and source and target tokens/s of a run's training, from its last checkpoint."""
    paths = step_checkpoints(run_dir / "checkpoints")
    progress = load_checkpoint(paths[-1], mmap=True)["progress"] if paths else {}
    seconds = float(progress.get("train_seconds", 0.0))

    def speed(key: str) -> float | None:
        tokens = progress.get(key)
        return tokens / seconds if tokens and seconds > 0 else None

    return TrainingFigures(int(progress.get("step", 0)), seconds / 60, speed("src_tokens"), speed("tgt_tokens"))


def translate_timed(run: LoadedRun, sources: list[str], **decode: object) -> tuple[list[str], float]:
    """Translations of ``sources`` and the wall seconds they took (one process, the run's decode settings)."""
    start = time.perf_counter()
    hyps = run.translate(sources, **decode)
    return hyps, time.perf_counter() - start


@dataclass
class SystemResult:
    """One row of a comparison table."""

    name: str
    parameters: int
    training: TrainingFigures
    bleu: float
    tok_bleu: float | None
    sign_p: float | None  # sign test against the first (baseline) system; None for the baseline itself
    sentences_per_second: float
    src_tokens_per_second: float
    hyps: list[str]

    def row(self) -> list[str | int | float | None]:
        """Cells in the order of :func:`system_headers`."""
        src_speed, tgt_speed = self.training.src_tokens_per_second, self.training.tgt_tokens_per_second
        return [
            self.name, self.bleu, self.tok_bleu, None if self.sign_p is None else f"{self.sign_p:.3g}",
            f"{self.parameters / 1e6:.2f}M", self.training.updates, round(self.training.minutes, 1),
            None if src_speed is None else round(src_speed), None if tgt_speed is None else round(tgt_speed),
            round(self.sentences_per_second, 1), round(self.src_tokens_per_second),
        ]


def system_headers(reference: str) -> list[str]:
    """The columns of :meth:`SystemResult.row`; ``reference`` names the system of the sign tests (the first)."""
    return [
        "system", "BLEU", "tok BLEU", f"sign p vs {reference}", "params", "updates", "train min", "train src tok/s",
        "train tgt tok/s", "translate sent/s", "translate src tok/s",
    ]


def compare_systems(
    runs: Sequence[tuple[str, Path]], sources: list[str], refs: list[str], checkpoint: str = "best",
    tokenized_bleu: bool = False, device: str = "auto", **decode: object,
) -> list[SystemResult]:
    """Translate ``sources`` with every run and score them; the first run is the baseline of the sign tests.

    Args:
        runs: (name, run directory) pairs, baseline first.
        sources, refs: the test set (raw source lines, detokenized references).
        checkpoint: which checkpoint of every run (``best``, ``last``, ``averaged`` or a path).
        tokenized_bleu: add multi-bleu.perl's BLEU (for pre-tokenized data such as small_parallel_enja).
        decode: DecodeConfig overrides shared by all systems (e.g. ``beam_size=5``).
    """
    results: list[SystemResult] = []
    source_tokens = sum(len(s.split()) for s in sources)
    for name, run_dir in runs:
        run = load_run(run_dir, checkpoint, device)
        hyps, seconds = translate_timed(run, sources, **decode)
        scores = corpus_scores(hyps, refs, tokenized_bleu=tokenized_bleu)
        sign_p = sign_test(results[0].hyps, hyps, refs).p_value if results else None
        results.append(SystemResult(
            name, count_parameters(run.model), training_figures(Path(run_dir)), float(scores["bleu"]),
            float(scores["tok_bleu"]) if tokenized_bleu else None, sign_p, len(sources) / seconds,
            source_tokens / seconds, hyps,
        ))
    return results


def robustness_curve(
    run: LoadedRun, sources: list[str], refs: list[str], fractions: Sequence[float], seed: int, metric: Metric,
    **decode: object,
) -> list[float]:
    """BLEU of ``run`` on copies of the test set with each fraction of source words swapped (paper 001, §6.5)."""
    from ordo.analysis.perturb import swap_sentences

    return [metric(run.translate(swap_sentences(sources, f, seed), **decode), refs) for f in fractions]
