"""ordo.evaluation.seeds: the t-test over seeds (its error rate and power in simulation, its interval by hand),
the minimum detectable gain, the seeds a target needs, the verdict words, bad input."""

import numpy as np
import pytest

from ordo.errors import InputError
from ordo.evaluation.seeds import (
    GAIN,
    INCONCLUSIVE,
    LOSS,
    RULED_OUT,
    SeedMetric,
    SeedTest,
    bleu_metric,
    compare_seeds,
    min_detectable_gain,
    pooled_bootstrap_p,
    ribes_metric,
    seeds_due,
    seeds_needed,
    verdict,
)
from ordo.evaluation.significance import bleu_bootstrap_p

WORDS = ["ein", "Mann", "fährt", "mit", "dem", "Fahrrad", "über", "eine", "Brücke", "am", "Abend"]
REFS = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))] * 4  # 44 sentences
SEED_SD = 0.3      # BLEU: about ordo's measured seed spread
SENTENCES = 600


def exact_share(hyps, refs):
    """A hand-computable score: the percentage of hypotheses equal to their reference."""
    return 100 * sum(h == r for h, r in zip(hyps, refs)) / len(refs)


EXACT = SeedMetric("exact %", exact_share, bleu_bootstrap_p)


def run(correct: int) -> list[str]:
    """The references with all but the first ``correct`` sentences cut short."""
    return [r if i < correct else " ".join(r.split()[:-3]) for i, r in enumerate(REFS)]


def simulated_verdicts(seeds: int, gain: float, experiments: int, seed_sd: float = SEED_SD, rng_seed: int = 0):
    """The verdicts of ``experiments`` simulated comparisons of ``seeds`` seeds a side: each run's corpus score is
    the mean of its sentence scores, which carry the sentence's difficulty (shared by every run), the system's
    true ``gain``, the run's seed offset and sentence-level noise (half the seed variance each)."""
    rng = np.random.default_rng(rng_seed)
    difficulty = rng.normal(50, 20, (experiments, 1, 1, SENTENCES))
    offset = rng.normal(0, seed_sd * np.sqrt(0.5), (experiments, 2, seeds, 1))
    noise = rng.normal(0, seed_sd * np.sqrt(0.5 * SENTENCES), (experiments, 2, seeds, SENTENCES))
    corpus = (difficulty + offset + noise).mean(axis=3) + np.array([0.0, gain]).reshape(1, 2, 1)
    return [SeedTest(tuple(base), tuple(system)).verdict() for base, system in corpus]


@pytest.mark.parametrize("seeds", [3, 6, 10])
def test_with_no_true_gain_it_says_gain_or_loss_about_five_percent_of_the_time(seeds):
    verdicts = simulated_verdicts(seeds, 0.0, 3000, rng_seed=seeds)
    false_rate = sum(v in (GAIN, LOSS) for v in verdicts) / len(verdicts)
    assert 0.04 <= false_rate <= 0.06
    assert set(verdicts) <= {GAIN, LOSS, INCONCLUSIVE}  # no target: nothing is ruled out


def test_the_minimum_detectable_gain_falls_with_seeds_and_is_found_eighty_percent_of_the_time():
    assert min_detectable_gain(SEED_SD, 10, 10) < min_detectable_gain(SEED_SD, 6, 6) < min_detectable_gain(
        SEED_SD, 3, 3)
    planted = min_detectable_gain(SEED_SD, 6, 6)
    assert 0.4 < planted < 0.7  # about 1.8 seed sds at six seeds a side
    found = sum(v == GAIN for v in simulated_verdicts(6, planted, 2000, rng_seed=7)) / 2000
    assert 0.75 <= found <= 0.85


@pytest.mark.parametrize("seed_sd", [0.3, 0.5])
def test_a_planted_gain_of_one_bleu_at_six_seeds_a_side_is_found(seed_sd):
    verdicts = simulated_verdicts(6, 1.0, 1000, seed_sd, rng_seed=11)
    assert sum(v == GAIN for v in verdicts) / len(verdicts) >= 0.75


def two_stage_verdicts(gain: float, experiments: int, seed_sd: float, rng_seed: int) -> list[tuple[str, str, int]]:
    """(verdict at six seeds a side, verdict at the seeds due, seeds due) of ``experiments`` simulated
    comparisons against a target of 1.0 BLEU, each seed's score normal around the system's mean."""
    rng = np.random.default_rng(rng_seed)
    results = []
    for base, system in rng.normal(0, seed_sd, (experiments, 2, 10)) + np.array([0.0, gain]).reshape(1, 2, 1):
        due = seeds_due(list(base), list(system), 1.0, 6)
        results.append((SeedTest(tuple(base[:6]), tuple(system[:6])).verdict(1.0),
                        SeedTest(tuple(base[:due]), tuple(system[:due])).verdict(1.0), due))
    return results


def test_more_seeds_for_an_inconclusive_claim_keep_the_error_rate_and_find_more_gains():
    # at a seed sd of 0.7, six seeds a side leave a 1.0 gain inconclusive often, and 7-10 seeds detect it
    null = two_stage_verdicts(0.0, 2000, 0.7, rng_seed=3)
    assert sum(due > 6 for _, _, due in null) / len(null) > 0.08  # the second look happens
    assert 0.035 <= sum(second in (GAIN, LOSS) for _, second, _ in null) / len(null) <= 0.07
    planted = two_stage_verdicts(1.0, 1000, 0.7, rng_seed=4)
    found_at_six, found = (sum(v[index] == GAIN for v in planted) / len(planted) for index in (0, 1))
    assert found >= found_at_six + 0.05


def test_the_seeds_due_by_hand():
    # gain +0.5, pooled sd 0.707: the interval [-2.54, +3.54] holds 0 and +1.0; 9 seeds a side detect 1.0
    assert seeds_due([30.0, 31.0], [30.5, 31.5], 1.0, 2) == 9
    assert seeds_due([30.0, 31.0, 45.0], [30.5, 31.5, 20.0], 1.0, 2) == 9  # from the first two alone
    assert seeds_due([30.0, 31.0], [30.5, 31.5], 1.0, 2, up_to=8) == 2
    assert seeds_due([30.0, 31.0], [30.5, 31.5], 0.3, 2) == 2  # 89 seeds: none added
    assert seeds_due([30.0, 31.0], [20.5, 21.5], 1.0, 2) == 2  # a loss is no reason for more
    assert seeds_due([30.0, 31.0], [30.5], 1.0, 2) == 2  # not yet two a side


def test_the_interval_and_p_by_hand():
    test = SeedTest((1.0, 2.0, 3.0), (3.0, 4.0, 5.0))  # variances 1 and 1: pooled sd 1, 4 degrees of freedom
    assert test.mean_gain == 2.0 and test.sd == pytest.approx(1.0) and test.df == 4
    assert test.standard_error == pytest.approx((2 / 3) ** 0.5)
    half = 2.7764 * (2 / 3) ** 0.5  # t_{0.975, 4} from a table
    assert test.interval == pytest.approx((2 - half, 2 + half), abs=1e-3)
    assert test.p_value == pytest.approx(0.0705, abs=5e-4)  # t = 2.449 with 4 degrees of freedom
    two = SeedTest((1.0, 3.0), (4.0, 6.0))  # sd √2, standard error √2, t_{0.975, 2} = 4.3027
    assert two.interval == pytest.approx((3 - 4.3027 * 2 ** 0.5, 3 + 4.3027 * 2 ** 0.5), abs=1e-3)
    assert SeedTest((1.0, 2.0, 3.0), (3.0, 4.0)).df == 3
    once = SeedTest((1.0, 2.0, 3.0), (5.0,))  # an upper bound run once: the spread is the baseline's alone
    assert once.sd == pytest.approx(1.0) and once.df == 2
    assert once.standard_error == pytest.approx((1 + 1 / 3) ** 0.5)


@pytest.mark.parametrize(("interval", "target", "expected"), [
    ((0.2, 1.5), 1.0, GAIN),
    ((-1.2, -0.1), 1.0, LOSS),
    ((-0.3, 0.6), 1.0, RULED_OUT),     # contains 0, tops out below the claimed 1.0
    ((-0.3, 1.4), 1.0, INCONCLUSIVE),  # contains 0 and 1.0
    ((-0.3, 0.6), None, INCONCLUSIVE),  # nothing claimed, nothing to rule out
])
def test_the_verdict_words(interval, target, expected):
    assert verdict(interval, target) == expected


def test_the_seeds_needed_are_the_fewest_that_detect_the_target():
    test = SeedTest((34.3, 34.8, 34.4), (34.5, 34.9, 34.0))  # sd about 0.3
    needed = test.seeds_needed(0.75)
    assert needed is not None and needed > 3
    assert min_detectable_gain(test.sd, needed, needed) <= 0.75 < min_detectable_gain(test.sd, needed - 1, needed - 1)
    assert test.seeds_needed(0.001) is None  # beyond any budget
    assert seeds_needed(0.75, test.sd) == needed  # the same count from an assumed sd, before any run
    assert seeds_needed(0.93, 0.3) == 3 and seeds_needed(0.75, 0.3) == 4  # 3 seeds a side detect 0.92 at sd 0.3


def test_more_seeds_narrow_the_interval_that_one_gain_gets():
    few = SeedTest((34.0, 34.6, 34.3), (34.6, 35.2, 34.9))
    many = SeedTest((34.0, 34.6, 34.3) * 3, (34.6, 35.2, 34.9) * 3)
    assert few.mean_gain == pytest.approx(many.mean_gain)
    assert few.verdict() == INCONCLUSIVE and many.verdict() == GAIN


def test_the_pooled_bootstrap_uses_the_paired_seeds_and_the_given_pairs_only():
    same = pooled_bootstrap_p([REFS, run(0)], [REFS, run(0)], REFS)
    assert same == 1.0
    better = pooled_bootstrap_p([run(0), run(0), run(0)], [REFS, REFS], REFS)  # a third baseline seed unpaired
    assert better < 0.01
    first_half_only = pooled_bootstrap_p([run(22)], [REFS], REFS, indices=range(22))  # identical there
    assert first_half_only == 1.0


def test_compare_seeds_scores_every_run_and_judges_against_the_target():
    result = compare_seeds([run(11), run(22), run(33)], [run(33), run(44), run(40)], REFS, EXACT, target_gain=30.0)
    assert result.test.base_scores == (25.0, 50.0, 75.0)
    assert result.test.system_scores == pytest.approx((75.0, 100.0, 100 * 40 / 44))
    assert result.verdict == INCONCLUSIVE and result.seeds_needed is not None and result.seeds_needed > 3
    assert compare_seeds([run(11), run(12)], [run(44), run(40)], REFS, EXACT).verdict == GAIN


def test_too_few_seeds_short_runs_a_run_given_twice_and_a_bad_target_are_named():
    with pytest.raises(InputError, match="1 baseline and 1 system seed\\(s\\): the test needs a seed of each"):
        compare_seeds([REFS], [run(0)], REFS, EXACT)
    with pytest.raises(InputError, match="0 baseline and 3 system seed"):
        SeedTest((), (1.0, 2.0, 3.0))
    with pytest.raises(InputError, match="system run 2: 43 lines for 44 references"):
        compare_seeds([REFS, run(0)], [REFS, REFS[:-1]], REFS, EXACT)
    with pytest.raises(InputError, match="baseline run 2 is identical to an earlier baseline run"):
        compare_seeds([run(0), run(0)], [REFS, run(1)], REFS, EXACT)  # would fake a spread of 0
    with pytest.raises(InputError, match="target gain 0"):
        compare_seeds([REFS, run(0)], [REFS, run(1)], REFS, EXACT, target_gain=0)


def test_seeds_are_scored_with_sacrebleu_by_default_and_multi_bleu_on_tokenized_text():
    refs = [f"{r}." for r in REFS]     # detokenized: the period attached
    spaced = [f"{r} ." for r in REFS]  # sacreBLEU's 13a splits it off, whitespace BLEU does not
    result = compare_seeds([run(0), run(1)], [spaced, REFS], refs)
    assert result.metric == "BLEU" and result.test.system_scores[0] == pytest.approx(100.0)
    assert compare_seeds([run(0), run(1)], [spaced, REFS], refs,
                         bleu_metric(tokenized=True)).test.system_scores[0] < 90


def test_ribes_judges_word_order_where_bleu_barely_moves():
    swapped = [" ".join(r.split()[5:] + r.split()[:5]) for r in REFS]  # the same words, two halves swapped
    base = [swapped, [f"{s} ein" for s in swapped]]                     # two baseline seeds, out of order
    system = [REFS, [f"{r} ein" for r in REFS]]                         # in order
    bleu = compare_seeds(base, system, REFS)
    ribes = compare_seeds(base, system, REFS, ribes_metric())
    assert ribes.metric == "RIBES" and ribes.test.system_scores[0] == pytest.approx(100.0)
    assert ribes.test.mean_gain > 2 * bleu.test.mean_gain > 0 and ribes.verdict == GAIN
    assert ribes.sentence_p < 0.01


@pytest.mark.parametrize("target", [float("nan"), float("inf"), -1.0])
def test_a_target_gain_that_no_claim_states_is_named_rather_than_judged(target):
    with pytest.raises(InputError, match=f"target gain {target}: give the"):
        compare_seeds([REFS, run(0)], [REFS, run(1)], REFS, EXACT, target_gain=target)
