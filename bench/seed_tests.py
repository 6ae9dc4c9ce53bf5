"""Which test says whether a method helps over seeds? A simulation of the candidates (issue 40).

Each simulated experiment trains ``n`` seeds of a baseline and ``n`` of a system and scores them on one test
set of ``--sentences`` sentences. A run's sentence score is the sentence's difficulty (shared by every run) plus
the system's true effect, plus the run's seed offset (normal, one per run) and sentence-level noise (normal, one
per sentence and run: a seed's translations err on different sentences); a run's corpus score is the mean of
its sentence scores. The seed sd of the corpus score is ``--seed-sd`` (0.3 BLEU, about ordo's measured
spread), split between the seed offset and the sentence-level noise in three ways; a fourth scenario doubles
the system's spread.

The candidates, each deciding "the systems differ" at level 0.05:

- **pooled t**: Student's two-sample t-test over the per-seed corpus scores (ordo.evaluation.seeds.SeedTest);
- **Welch t**: the same with Welch's unequal-variance correction;
- **multi-bootstrap**: Sellam et al. 2022 (The MultiBERTs, ICLR): each system's seeds and, jointly, the test
  sentences resampled; two-sided p from the share of resampled mean gains on either side of 0;
- **old rule**: ordo's earlier verdict: mean gain beyond twice the baseline's seed sd, the same sign on every
  seed (pairs in order).

Reported per scenario and seed count: how often each says "differ" at zero effect (the false rate, ideally
0.05), and at true gains of 0.5 and 1.0 (the power). The pooled t's minimum detectable gain at 80% power
(ordo.evaluation.seeds.min_detectable_gain) is given beside. Writes a markdown table with the command line.

usage: python bench/seed_tests.py [--experiments 2000] [--sentences 800] [--seed-sd 0.3]
                                  [--out bench/results/seed_tests.md]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ordo.evaluation.seeds import min_detectable_gain

ALPHA = 0.05
BOOTSTRAP = 200   # resamples per multi-bootstrap test
BLOCKS = 20       # experiments share a block's sentence resamples (drawn once per block)
SEED_COUNTS = (2, 3, 6, 10)
EFFECTS = (0.0, 0.5, 1.0)
TESTS = ("pooled t", "Welch t", "multi-bootstrap", "old rule")


def scenarios(seed_sd: float) -> dict[str, tuple[float, float, float]]:
    """Name -> (share of the seed variance from the run's seed offset, rest from sentence noise; the system's
    spread relative to the baseline's)."""
    return {"half seed offset, half sentence noise": (0.5, 1.0, seed_sd),
            "mostly seed offset (94%)": (0.94, 1.0, seed_sd),
            "mostly sentence noise (94%)": (0.06, 1.0, seed_sd),
            "half and half, the system's spread doubled": (0.5, 2.0, seed_sd)}


def simulate(rng: np.random.Generator, experiments: int, seeds: int, sentences: int, seed_sd: float,
             offset_share: float, spread: float, effect: float) -> np.ndarray:
    """Sentence scores (experiments, 2 systems, seeds, sentences): baseline first."""
    difficulty = rng.normal(0, 20, (experiments, 1, 1, sentences))
    scale = np.array([1.0, spread]).reshape(1, 2, 1, 1) * seed_sd
    offset = rng.normal(0, 1, (experiments, 2, seeds, 1)) * scale * math.sqrt(offset_share)
    noise = rng.normal(0, 1, (experiments, 2, seeds, sentences)) * scale * math.sqrt((1 - offset_share) * sentences)
    return difficulty + offset + noise + np.array([0.0, effect]).reshape(1, 2, 1, 1)


def multi_bootstrap_differs(rng: np.random.Generator, scores: np.ndarray) -> np.ndarray:
    """The multi-bootstrap's decision for each experiment of ``scores`` (sentence scores as :func:`simulate`)."""
    experiments, _, seeds, sentences = scores.shape
    decisions = []
    for block in np.array_split(np.arange(experiments), BLOCKS):
        weights = rng.multinomial(sentences, np.full(sentences, 1 / sentences), size=BOOTSTRAP).T / sentences
        corpus = scores[block] @ weights  # (experiments, 2, seeds, resamples): each run on each resampled test set
        picks = rng.integers(0, seeds, (len(block), 2, seeds, BOOTSTRAP))
        means = np.take_along_axis(corpus, picks, axis=2).mean(axis=2)
        gains = means[:, 1] - means[:, 0]
        p_values = 2 * np.minimum((gains <= 0).mean(axis=1), (gains >= 0).mean(axis=1))
        decisions.append(p_values < ALPHA)
    return np.concatenate(decisions)


def old_rule_differs(corpus: np.ndarray) -> np.ndarray:
    """The earlier rule's decision ("confirmed" or "reversed") for each experiment of per-seed ``corpus``
    scores (experiments, 2, seeds)."""
    gains = corpus[:, 1] - corpus[:, 0]
    band = 2 * corpus[:, 0].std(axis=1, ddof=1)
    same_sign = np.all(gains > 0, axis=1) | np.all(gains < 0, axis=1)
    return (np.abs(gains.mean(axis=1)) > band) & same_sign


def rates(rng: np.random.Generator, args: argparse.Namespace, seeds: int, offset_share: float, spread: float,
          effect: float) -> dict[str, float]:
    """How often each test says the systems differ over ``args.experiments`` simulated experiments."""
    scores = simulate(rng, args.experiments, seeds, args.sentences, args.seed_sd, offset_share, spread, effect)
    corpus = scores.mean(axis=3)
    differs = {
        "pooled t": stats.ttest_ind(corpus[:, 1], corpus[:, 0], axis=1).pvalue < ALPHA,
        "Welch t": stats.ttest_ind(corpus[:, 1], corpus[:, 0], axis=1, equal_var=False).pvalue < ALPHA,
        "multi-bootstrap": multi_bootstrap_differs(rng, scores),
        "old rule": old_rule_differs(corpus),
    }
    return {name: float(decided.mean()) for name, decided in differs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiments", type=int, default=2000)
    parser.add_argument("--sentences", type=int, default=800)
    parser.add_argument("--seed-sd", type=float, default=0.3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "seed_tests.md")
    args = parser.parse_args()
    rng = np.random.default_rng(2022)
    header = ["seeds per side", *(f"{test}: {label}" for test in TESTS
                                  for label in ("false rate", "power at +0.5", "power at +1.0")),
              "pooled t: min. detectable gain (80%)"]
    lines = [(f"`python bench/seed_tests.py --experiments {args.experiments} --sentences {args.sentences} "
             f"--seed-sd {args.seed_sd}`: the share of {args.experiments} simulated experiments in which each test "
             f"says the systems differ (level {ALPHA}), {args.sentences} test sentences, seed sd {args.seed_sd}."), ""]
    for name, (share, spread, seed_sd) in scenarios(args.seed_sd).items():
        lines += [f"**{name}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for seeds in SEED_COUNTS:
            found = {effect: rates(rng, args, seeds, share, spread, effect) for effect in EFFECTS}
            cells = [f"{found[effect][test]:.3f}" for test in TESTS for effect in EFFECTS]
            pooled_sd = seed_sd * math.sqrt((1 + spread ** 2) / 2)
            lines.append(f"| {seeds} | " + " | ".join(cells)
                         + f" | {min_detectable_gain(pooled_sd, seeds, seeds):.2f} |")
            print(lines[-1], flush=True)
        lines.append("")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
