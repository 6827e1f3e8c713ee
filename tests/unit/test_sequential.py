"""Power and sequential stopping (specexp.metrics.sequential) on synthetic inputs with known answers."""

import math

import numpy as np
import pytest
from scipy import stats

from specexp.config import MeasureConfig
from specexp.metrics.sequential import (
    alpha_at,
    detectable,
    detectable_from,
    look_alphas,
    looks,
    spent,
    stop,
    widen,
)
from specexp.metrics.stats import Estimate, arm_ratio, estimate
from specexp.metrics.window_results import aggregate
from specexp.report.analysis import apply
from specexp.report.verdict import verdicts
from specexp.result import PointResult


def test_the_detectable_difference_is_the_t_tests_at_80_percent_power() -> None:
    # 8 pairs, log ratio sd 0.1: (t(0.975, 7) + t(0.8, 7)) * 0.1 / sqrt(8)
    expected = math.expm1((stats.t.ppf(0.975, 7) + stats.t.ppf(0.8, 7)) * 0.1 / math.sqrt(8))
    assert detectable(0.1, 8) == pytest.approx(expected) and 0.12 < expected < 0.13
    assert detectable(0.1, 32) < detectable(0.1, 8) / 2 and detectable(0.1, 1) == math.inf
    est = Estimate(1.0, 0.1 / math.sqrt(8), 7, "log")  # what 8 such pairs measure
    assert detectable_from(est) == pytest.approx(expected)
    assert detectable_from(Estimate(100.0, 2.0, 7)) is None  # a linear estimate is no ratio


def test_a_simulated_design_detects_its_stated_difference_four_times_in_five() -> None:
    rng = np.random.default_rng(3)
    effect, ones = detectable(0.1, 8), np.ones(8)
    found = 0
    for _ in range(400):
        pairs = (1 + effect) * np.exp(rng.normal(0.0, 0.1, 8))
        found += arm_ratio((pairs, ones), (ones, ones), paired=True).lo > 1
    assert 0.72 < found / 400 < 0.88  # 80% power, up to the simulation's noise


def test_looks_grow_by_half_and_spend_five_percent_in_all() -> None:
    assert looks(3, 20) == (3, 5, 8, 12, 18, 20) and looks(8, 8) == (8,)
    shares = look_alphas(looks(8, 24))
    assert sum(shares) == pytest.approx(0.05) and shares[0] < 0.002 < shares[-1]  # O'Brien-Fleming: late
    assert spent(1.0) == pytest.approx(0.05) and spent(0.0) == 0.0
    assert alpha_at(8, 8, 24) == shares[0] and alpha_at(9, 8, 24) == shares[1]  # a cap between looks
    assert alpha_at(8, 8, 8) == pytest.approx(0.05)  # a fixed design: its one look spends all


def test_a_look_widens_the_interval_to_its_share() -> None:
    est = Estimate(1.2, 0.02, 7, "log")
    wide = widen(est, 0.01)
    assert wide.value == est.value and wide.lo < est.lo and wide.hi > est.hi
    exact = 1.2 * math.exp(-stats.t.ppf(0.995, 7) * 0.02)
    assert wide.lo == pytest.approx(exact)
    assert widen(Estimate(5.0), 0.01) == Estimate(5.0)  # no interval: nothing to widen


def test_the_stopping_rule_stops_only_at_a_look_once_precise_enough() -> None:
    tight = Estimate(1.0, 0.001, 7, "log")
    assert stop(tight, 8, 8, 24, 0.05) and not stop(tight, 9, 8, 24, 0.05)  # 9 is no look
    assert not stop(Estimate(1.0, 0.05, 7, "log"), 8, 8, 24, 0.05)  # too wide at the first look's level
    steady = estimate([100.0, 100.2, 99.9, 100.1, 100.0])  # ±0.14% at 95%; at the second look's level ±0.8%
    assert steady.half / steady.value < 0.002 < 0.008 < widen(steady, look_alphas(looks(3, 20))[1]).half / 100
    assert stop(steady, 5, 3, 20, 0.01) and not stop(steady, 5, 3, 20, 0.005)


def test_a_point_that_stopped_on_a_precision_target_reports_its_looks_level() -> None:
    windows = [{"output_throughput": v} for v in (100.0, 101.0, 99.0, 100.5, 100.2)]
    fixed = aggregate(windows, MeasureConfig(windows=5))
    sequential = aggregate(windows, MeasureConfig(windows=3, rel_ci=0.03, max_windows=20))
    assert sequential["output_throughput_lo"] < fixed["output_throughput_lo"]
    assert sequential["output_throughput_hi"] > fixed["output_throughput_hi"]


def point(drafter: str, tokens: list[float], starts: list[float], **measure: float) -> PointResult:
    windows = [
        {"output_throughput": t, "window_output_tokens": t, "window_s": 1.0, "window_start": s, "window_end": s + 1}
        for t, s in zip(tokens, starts, strict=True)
    ]
    params = {"engine.name": "torch", "drafter.name": drafter, "batch": 4, "sweep_id": "s"}
    params |= {f"measure.{k}": v for k, v in measure.items()}
    row = PointResult.from_params("ok", params, windows=windows)
    row.metrics = aggregate(windows, MeasureConfig(windows=len(windows)))
    return row


BASE, SPEC = [100.0, 104.0, 97.0, 101.0, 99.0], [112.0, 113.0, 110.0, 118.0, 109.0]


def test_a_speedup_that_stopped_on_a_precision_target_gets_its_looks_level_and_the_verdict_its_power() -> None:
    fixed = [point("none", BASE, [0, 2, 4, 6, 8]), point("tiny", SPEC, [1, 3, 5, 7, 9])]
    target = {"rel_ci": 0.05, "windows": 3, "max_windows": 20}  # stopped at the look at 5 windows
    early = [point("none", BASE, [0, 2, 4, 6, 8], **target), point("tiny", SPEC, [1, 3, 5, 7, 9], **target)]
    a, b = apply(fixed).speedups[1], apply(early).speedups[1]
    assert a["speedup"] == b["speedup"] and b["speedup_lo"] < a["speedup_lo"] < a["speedup_hi"] < b["speedup_hi"]
    line, how = verdicts(fixed, apply(fixed))
    assert "power: a speedup difference of " in how and "(80% power, at each point's spread)" in how
    assert "measure.rel_ci" not in how
    line, how = verdicts(early, apply(early))
    assert "no measurable difference at batch 4" in line and "they detect only a difference of " in line
    assert "O'Brien-Fleming spending over looks at 3, 5, 8, 12, 18, 20 windows), so that stopping early" in how
    assert "(each point stopped on its own output_throughput's interval)" in how  # no tag: a point alone
    for row in early:
        row.tags["specexp.stopped_on"] = "speedup"  # as specexp.point.job tags arms that stopped together
    assert "(arms taking turns stopped together on their speedups' intervals)" in verdicts(early, apply(early))[1]
