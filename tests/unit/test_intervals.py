"""Estimates and their 95% intervals on synthetic samples with known answers."""

import math

import numpy as np
import pytest

from specexp.metrics.stats import Estimate, combine, estimate, from_interval, ratio


def test_estimate_is_a_student_t_interval() -> None:
    est = estimate([1.0, 2.0, 3.0])
    assert est.value == 2.0 and est.df == 2
    assert est.half == pytest.approx(4.303 / math.sqrt(3))
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
    assert r.se == pytest.approx(2.0 * math.sqrt(a + b))
    assert r.df == pytest.approx((a + b) ** 2 / (a**2 / 4 + b**2 / 9))


def test_combined_launches_are_never_narrower_than_their_windows() -> None:
    tight_between = combine([Estimate(100.0, 5.0, 2), Estimate(100.0, 5.0, 2)])
    assert tight_between.se == pytest.approx(5.0 / math.sqrt(2))
    spread = combine([Estimate(90.0, 0.1, 2), Estimate(110.0, 0.1, 2)])
    assert spread.value == 100.0 and spread.se == pytest.approx(10.0) and spread.df == 1


def test_draws_follow_the_estimate() -> None:
    rng = np.random.default_rng(1)
    draws = Estimate(10.0, 1.0, 30).draws(rng, 20000)
    assert draws.mean() == pytest.approx(10.0, abs=0.05) and draws.std() == pytest.approx(1.0, rel=0.05)
    assert set(Estimate(3.0).draws(rng, 5)) == {3.0}
