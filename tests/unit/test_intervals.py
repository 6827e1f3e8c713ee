"""Estimates and their 95% intervals on synthetic samples with known answers."""

import math

import numpy as np
import pytest
from scipy import stats

from specexp.metrics.stats import (
    DRAWS,
    Estimate,
    arm_ratio,
    combine,
    estimate,
    fraction,
    from_bounds,
    from_interval,
    positive,
    proportion,
    ratio,
    side,
    t975,
    tail_count,
)


def test_estimate_is_a_student_t_interval() -> None:
    est = estimate([1.0, 2.0, 3.0])
    assert est.value == 2.0 and est.df == 2
    assert est.half == pytest.approx(4.302653 / math.sqrt(3))
    assert not estimate([5.0]).known and estimate([5.0]).half == 0.0
    same = estimate([1.641025641025641] * 3)  # a deterministic metric: no rounding noise in its spread
    assert same.known and same.half == 0.0


def test_a_recorded_interval_gives_the_same_estimate_back() -> None:
    est = estimate([100.0, 104.0, 96.0, 101.0])
    back = from_interval(est.value, est.half, 4)
    assert back.se == pytest.approx(est.se) and back.df == est.df


def test_equal_arms_give_a_speedup_interval_that_contains_one() -> None:
    spec = estimate([100.0, 104.0, 96.0])
    base = estimate([101.0, 97.0, 103.0])
    speedup = ratio(spec, base)
    assert speedup.lo < 1.0 < speedup.hi


def test_clearly_different_arms_exclude_one() -> None:
    speedup = ratio(estimate([150.0, 151.0, 149.0]), estimate([100.0, 101.0, 99.0]))
    assert speedup.value == pytest.approx(1.5) and speedup.lo > 1.0


def test_ratio_adds_relative_errors_and_uses_welch_degrees_of_freedom() -> None:
    num, den = Estimate(200.0, 4.0, 4), Estimate(100.0, 1.0, 9)
    r = ratio(num, den)
    a, b = (4 / 200) ** 2, (1 / 100) ** 2
    assert r.scale == "log" and r.se == pytest.approx(math.sqrt(a + b))  # on log(ratio)
    assert r.df == pytest.approx((a + b) ** 2 / (a**2 / 4 + b**2 / 9))
    t = stats.t.ppf(0.975, r.df)
    assert (r.lo, r.hi) == pytest.approx((2.0 * math.exp(-t * r.se), 2.0 * math.exp(t * r.se)))


def test_quantiles_are_exact_where_the_old_table_was_anti_conservative() -> None:
    # the hand table gave 2.179 at df 11, 2.131 at 13, 2.086 at 16 and 1.96 at 31
    for df, exact in ((11, 2.200985), (13, 2.160369), (16, 2.119905), (31, 2.039513)):
        assert t975(df) == pytest.approx(exact, abs=1e-6)
        assert Estimate(0.0, 1.0, df).half == pytest.approx(exact, abs=1e-6)
    assert t975(2.5) == pytest.approx(stats.t.ppf(0.975, 2.5))  # fractional (Welch) df, no rounding


def test_paired_windows_cancel_the_drift_they_share() -> None:
    # the machine drifts 2x between windows; each speculative window is 1.3x its partner
    base = [100.0, 200.0, 150.0, 120.0]
    spec = [b * r for b, r in zip(base, (1.28, 1.31, 1.30, 1.32), strict=True)]
    seconds = [1.0, 1.0, 1.0, 1.0]
    pair = arm_ratio((spec, seconds), (base, seconds), paired=True)
    assert pair.value == pytest.approx(sum(spec) / sum(base))  # the arms' tokens over their seconds
    rel = [np.array(arm) / np.mean(arm) - 1 for arm in (spec, base)]  # each window's relative residual
    assert pair.se == pytest.approx(np.std(rel[0] - rel[1], ddof=1) / 2) and pair.df == 3
    assert 1.26 < pair.lo < 1.3 < pair.hi < 1.34
    unpaired = arm_ratio((spec, seconds), (base, seconds), paired=False)
    assert unpaired.value == pair.value  # one estimand: only the interval knows the pairing
    assert unpaired.lo < 1 < unpaired.hi  # the drift swamps the unpaired ratio
    assert pair.half < unpaired.half / 10


def test_the_arms_ratio_weighs_each_window_by_its_seconds() -> None:
    """Windows of unequal length: the ratio is the arms' tokens over their seconds, not their windows'
    mean rate (nor the mean of the pairs' ratios)."""
    a = ([300.0, 100.0], [1.0, 2.0])  # 400 tokens in 3 s; rates 300 and 50
    b = ([100.0, 100.0], [1.0, 1.0])  # 200 tokens in 2 s
    assert arm_ratio(a, b, paired=True).value == pytest.approx((400 / 3) / 100)
    assert arm_ratio(a, b, paired=False).value == pytest.approx((400 / 3) / 100)
    assert arm_ratio(a, (b[0][:1], b[1][:1]), paired=False).known is False  # one window: no interval
    with pytest.raises(ValueError, match="as many windows"):
        arm_ratio(a, (b[0][:1], b[1][:1]), paired=True)


def test_a_recorded_asymmetric_interval_gives_the_same_estimate_back() -> None:
    ones = [1.0, 1.0, 1.0]
    pair = arm_ratio(([130.0, 262.0, 195.0], ones), ([100.0, 200.0, 150.0], ones), paired=True)
    back = from_bounds(pair.value, pair.lo, pair.hi, pair.df)
    assert back.se == pytest.approx(pair.se) and (back.lo, back.hi) == pytest.approx((pair.lo, pair.hi))


def test_proportions_and_rates_never_leave_their_range() -> None:
    two_of_three = proportion(2, 3)  # what once read 0.667 +- 1.434
    exact = stats.binomtest(2, 3).proportion_ci(0.95, method="exact")
    assert (two_of_three.lo, two_of_three.hi) == pytest.approx((exact.low, exact.high))
    assert proportion(0, 5).lo == 0.0 and proportion(5, 5).hi == 1.0
    pooled = combine([proportion(2, 3), proportion(3, 3)])  # launches pool their requests
    assert pooled.value == pytest.approx(5 / 6) and pooled.df == 6 and pooled.lo >= 0.0
    goodput = positive([9.0, 0.5, 5.5])  # once 5.02 +- 10.79
    assert 0.0 < goodput.lo < goodput.value < goodput.hi
    assert positive([0.0, 0.0, 0.0]).lo == 0.0


def test_classes_are_read_from_the_draws_that_match_the_printed_interval() -> None:
    tail = tail_count(DRAWS)
    est = Estimate(1.2, 0.05, 4)
    draws = np.sort(est.draws(np.random.default_rng(3)))
    assert draws[tail - 1] == pytest.approx(est.lo) and draws[DRAWS - tail] == pytest.approx(est.hi)
    assert side(est) == 1 and side(Estimate(0.8, 0.05, 4)) == -1 and side(Estimate(1.0, 0.05, 4)) == 0
    # the reproduction from the issue: 'same' at its own interval, whatever the break-even says
    assert side(Estimate(2.0447, 0.2531, 2.232), level=2.0) == 0


def test_combined_launches_are_never_narrower_than_their_windows() -> None:
    tight_between = combine([Estimate(100.0, 5.0, 2), Estimate(100.0, 5.0, 2)])
    assert tight_between.se == pytest.approx(5.0 / math.sqrt(2))
    spread = combine([Estimate(90.0, 0.1, 2), Estimate(110.0, 0.1, 2)])
    assert spread.value == 100.0 and spread.se == pytest.approx(10.0) and spread.df == 1


def test_draws_follow_the_estimate() -> None:
    rng = np.random.default_rng(1)
    draws = Estimate(10.0, 1.0, 30).draws(rng, 19999)
    assert draws.mean() == pytest.approx(10.0, abs=0.05) and draws.std() == pytest.approx(1.0, rel=0.05)
    assert set(Estimate(3.0).draws(rng, 5)) == {3.0}


def test_a_fractions_interval_is_made_on_the_logit_scale_and_read_back_so() -> None:
    est = fraction([0.99, 0.75, 0.97])
    assert est.scale == "logit" and 0 < est.lo < est.value < est.hi < 1
    assert fraction([1.0, 1.0, 1.0]).half == 0.0 and fraction([0.0, 0.0]).lo == 0.0  # all one way: no spread
    back = from_bounds(est.value, est.lo, est.hi, est.df, "logit")
    assert (back.lo, back.hi) == pytest.approx((est.lo, est.hi))
    both = combine([est, fraction([0.9, 0.8, 0.95])])  # two launches: still a fraction
    assert both.scale == "logit" and 0 < both.lo < both.hi < 1
