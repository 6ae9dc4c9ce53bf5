"""bench/cpu_defaults.py's verdict on auto against the better backend, from the rounds' ratios."""

import math

import pytest

from bench.cpu_defaults import Figures, auto_per_round, ratio_verdict


def spread_around(centre: float, log_sd: float) -> list[float]:
    """Three ratios whose logarithms have mean log(centre) and standard deviation ``log_sd``."""
    return [centre * math.exp(step * log_sd) for step in (-1, 0, 1)]


@pytest.mark.parametrize("ratios, higher_is_better, verdict, interval", [
    # t(2) = 4.303: half width 4.303 * 0.02 / sqrt(3) = 0.0497 in logs: 0.9 x e^(+-0.0497) = 0.856-0.946
    (spread_around(0.90, 0.02), True, "**behind**", "0.86-0.95"),
    (spread_around(1.00, 0.01), True, "level", "0.98-1.03"),
    (spread_around(0.96, 0.05), True, "unsettled", None),
    (spread_around(1.12, 0.02), False, "**behind**", "1.07-1.18"),  # memory: above the lower backend's
    (spread_around(0.90, 0.02), False, "level", None),
])
def test_auto_is_behind_only_where_the_whole_interval_trails_by_more_than_the_noise(
        ratios, higher_is_better, verdict, interval):
    said = ratio_verdict(ratios, higher_is_better)
    assert said.split(")")[1].split(":")[0].strip() == verdict
    if interval:
        assert f"95% CI {interval}" in said


def test_an_unsettled_comparison_says_how_many_rounds_would_settle_it():
    said = ratio_verdict(spread_around(0.90, 0.08), True)  # 0.9 is 0.054 in logs below the 0.95 line
    needed = math.ceil((1.96 * 0.08 / (math.log(0.95) - math.log(0.90))) ** 2)
    assert said.endswith(f"about {needed} rounds would settle it")
    assert ratio_verdict([0.9], True) == "one round: no interval"


def test_auto_running_a_fixed_choices_code_is_held_against_the_best_and_its_own_figure_apart():
    figures = {"blas": Figures(train_mb=[500.0, 520.0]), "onednn": Figures(train_mb=[580.0, 570.0]),
               "auto": Figures(train_mb=[600.0, 624.0]), "bf16": Figures(train_mb=[600.0, 650.0])}
    said = auto_per_round(figures, "train_mb", False, "bf16")
    assert said.startswith("1.20 [1.20-1.20]"), "auto over the lowest memory (blas's) in each round"
    assert "0.98 of its figure" in said, "the median of 1.00 and 0.96: auto over bf16's own figure"
