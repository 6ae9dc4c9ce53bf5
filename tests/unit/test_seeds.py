"""ordo.evaluation.seeds: the verdict rule over seeds, paired gains, the baseline's spread, bad input."""

import statistics

import pytest

from ordo.errors import InputError
from ordo.evaluation.seeds import (
    SeedMetric,
    bleu_metric,
    compare_seeds,
    pooled_bootstrap_p,
    ribes_metric,
    verdict,
)
from ordo.evaluation.significance import bleu_bootstrap_p

WORDS = ["ein", "Mann", "fährt", "mit", "dem", "Fahrrad", "über", "eine", "Brücke", "am", "Abend"]
REFS = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))] * 4  # 44 sentences


def exact_share(hyps, refs):
    """A hand-computable score: the percentage of hypotheses equal to their reference."""
    return 100 * sum(h == r for h, r in zip(hyps, refs)) / len(refs)


EXACT = SeedMetric("exact %", exact_share, bleu_bootstrap_p)


def run(correct: int) -> list[str]:
    """The references with all but the first ``correct`` sentences cut short."""
    return [r if i < correct else " ".join(r.split()[:-3]) for i, r in enumerate(REFS)]


@pytest.mark.parametrize(("gains", "sd", "expected"), [
    ([1.0, 1.2], 0.3, "confirmed"),                     # mean 1.1 > 0.6, both positive
    ([0.5, 0.5], 0.3, "not confirmed at this scale"),   # 0.5 < 2 sd
    ([2.0, -0.1], 0.1, "not confirmed at this scale"),  # signs differ
    ([-1.0, -0.9], 0.2, "reversed"),
])
def test_the_verdict_rule(gains, sd, expected):
    assert verdict(gains, sd) == expected


def test_seeds_are_paired_in_order_and_the_spread_counts_every_baseline_seed():
    base = [run(11), run(22), run(33)]   # 25, 50, 75% exact
    system = [run(33), run(44)]           # 75, 100%: gains +50, +50 against seeds 1 and 2
    result = compare_seeds(base, system, REFS, EXACT)
    assert result.base_scores == [25.0, 50.0, 75.0] and result.system_scores == [75.0, 100.0]
    assert result.gains == [50.0, 50.0] and result.mean_gain == 50.0
    assert result.baseline_sd == pytest.approx(statistics.stdev([25.0, 50.0, 75.0]))  # 25.0, band 50.0
    assert result.verdict == "not confirmed at this scale"  # 50 is not beyond 2 x 25
    result = compare_seeds([run(20), run(22)], system, REFS, EXACT)  # sd 3.2; gains +29.5, +50.0
    assert result.verdict == "confirmed" and result.p_value < 0.01
    assert compare_seeds([run(44), run(40)], [run(11), run(12)], REFS, EXACT).verdict == "reversed"


def test_the_pooled_bootstrap_uses_the_paired_seeds_and_the_given_pairs_only():
    same = pooled_bootstrap_p([REFS, run(0)], [REFS, run(0)], REFS)
    assert same == 1.0
    better = pooled_bootstrap_p([run(0), run(0), run(0)], [REFS, REFS], REFS)  # a third baseline seed unpaired
    assert better < 0.01
    first_half_only = pooled_bootstrap_p([run(22)], [REFS], REFS, indices=range(22))  # identical there
    assert first_half_only == 1.0


def test_too_few_seeds_unpaired_system_seeds_short_runs_and_a_run_given_twice_are_named():
    with pytest.raises(InputError, match="1 baseline and 2 system run\\(s\\): the verdict needs at least two"):
        compare_seeds([REFS], [REFS, run(0)], REFS, EXACT)
    with pytest.raises(InputError, match="2 baseline and 1 system run"):
        compare_seeds([REFS, run(0)], [REFS], REFS, EXACT)
    with pytest.raises(InputError, match="3 system runs for 2 baseline runs"):
        compare_seeds([REFS, run(0)], [REFS, run(0), run(1)], REFS, EXACT)
    with pytest.raises(InputError, match="system run 2: 43 lines for 44 references"):
        compare_seeds([REFS, run(0)], [REFS, REFS[:-1]], REFS, EXACT)
    with pytest.raises(InputError, match="baseline run 2 is identical to an earlier baseline run"):
        compare_seeds([run(0), run(0)], [REFS, run(1)], REFS, EXACT)  # would fake a spread of 0


def test_seeds_are_scored_with_sacrebleu_by_default_and_multi_bleu_on_tokenized_text():
    refs = [f"{r}." for r in REFS]     # detokenized: the period attached
    spaced = [f"{r} ." for r in REFS]  # sacreBLEU's 13a splits it off, whitespace BLEU does not
    result = compare_seeds([run(0), run(1)], [spaced, REFS], refs)
    assert result.metric == "BLEU" and result.system_scores[0] == pytest.approx(100.0)
    assert compare_seeds([run(0), run(1)], [spaced, REFS], refs, bleu_metric(tokenized=True)).system_scores[0] < 90


def test_ribes_judges_word_order_where_bleu_barely_moves():
    swapped = [" ".join(r.split()[5:] + r.split()[:5]) for r in REFS]  # the same words, two halves swapped
    base = [swapped, [f"{s} ein" for s in swapped]]                     # two baseline seeds, out of order
    system = [REFS, [f"{r} ein" for r in REFS]]                         # in order
    bleu = compare_seeds(base, system, REFS)
    ribes = compare_seeds(base, system, REFS, ribes_metric())
    assert ribes.metric == "RIBES" and ribes.system_scores[0] == pytest.approx(100.0)
    assert ribes.mean_gain > 2 * bleu.mean_gain > 0 and ribes.verdict == "confirmed" and ribes.p_value < 0.01
