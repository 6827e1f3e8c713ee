"""The adaptive break-even search's choice and stopping rules, on synthetic speedup curves, and its
configuration's one-line refusals."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from specexp.config import ConfigError, CrossoverConf, MeasureConfig
from specexp.metrics import stats
from specexp.metrics.stats import Estimate, from_interval
from specexp.metrics.window_results import aggregate
from specexp.report import analysis, breakeven, crossing
from specexp.report.breakeven import Search, Step, bisection_rule, median_rule, next_step
from specexp.report.crossing import crossover_interval
from specexp.report.crossover_points import FAILED, UNSETTLED, Believed, believed
from specexp.result import PointResult
from specexp.sweep.crossover import answer, steer

Curve = Callable[[int], float]


def log_linear(at: float, slope: float = 0.15) -> Curve:
    """Speedup falling linearly in log2(batch), through 1 at ``at``."""
    return lambda b: 1.0 - slope * (math.log2(b) - math.log2(at))


def convex(at: float) -> Curve:
    """Falling fast at small batches and flattening out, through 1 at ``at``."""
    return lambda b: 0.7 + 0.3 * (at / b) ** 0.5


def concave(at: float) -> Curve:
    """Flat at small batches, then falling fast, through 1 at ``at``."""
    return lambda b: 1.0 + 0.2 * (1 - (b / at) ** 1.5)


CURVES = [log_linear(7.3), log_linear(20.5), log_linear(2.6), convex(11.2), concave(5.4), concave(40.3)]


def run_search(curve: Curve, rule, search: Search, half: float = 0.0, seed: int = 0) -> tuple[Step, dict]:
    """The search driven to its end, each measured batch's speedup from ``curve``: exact (no
    interval) when ``half`` is 0, else with seeded noise and a 95% half-width ``half`` (3 windows)."""
    rng = np.random.default_rng(seed)
    points: dict[int, Estimate] = {}
    while True:
        step = next_step(points, search, rule, draws=1000)
        if step.batch is None:
            return step, points
        assert step.batch not in points
        noise = rng.normal(0, half / 4.3) if half else 0.0  # t(2)'s 95% quantile is 4.3 standard errors
        points[step.batch] = from_interval(curve(step.batch) + noise, half or None, 3)


def test_the_search_reads_the_verdicts_interval_log_scale_ratios_included() -> None:
    """The search's interval is crossing.crossover_interval's, from the same draws: paired ratios
    (log scale, asymmetric) drawn as their intervals are, not as a symmetric t."""
    rng = np.random.default_rng(3)
    for k in range(20):
        xs = sorted(rng.choice(np.arange(2, 64), size=rng.integers(1, 5), replace=False))
        xs = [1, *map(int, xs), 64]
        se = float(rng.uniform(0.01, 0.15))
        scale = "log" if k % 2 else "linear"
        points = {x: Estimate(float(rng.uniform(0.7, 1.3)), se, 2.0, scale) for x in xs}
        step = next_step(points, Search(max_points=64), draws=500)
        trusted = {x: e for x, e in points.items() if x not in crossing.breaks_trend(points)}  # as the verdict
        assert (step.lo, step.hi) == crossover_interval(trusted, draws=500), points


def test_a_log_scale_ratio_is_drawn_asymmetrically() -> None:
    """A wide paired ratio below 1 at the top end: its interval reaches further above its value than
    below it, and the break-even is drawn from that, not from a symmetric t of the same width."""
    ends = {1: Estimate(1.3, 0.01, 2.0)}
    log = {**ends, 64: Estimate(0.9, 0.3, 2.0, "log")}
    linear = {**ends, 64: Estimate(0.9, 0.9 * 0.3, 2.0)}
    assert log[64].hi - 0.9 > 0.9 - log[64].lo
    assert next_step(log, Search(), draws=999).lo != next_step(linear, Search(), draws=999).lo


def measured(drafter: str, batch: int, tputs: list[float], starts: list[float]) -> PointResult:
    """A closed-loop point measured in windows of 1 s starting at ``starts``."""
    windows = [
        {"output_throughput": t, "window_s": 1.0, "window_start": s, "window_end": s + 1.0}
        for t, s in zip(tputs, starts, strict=True)
    ]
    metrics = aggregate(windows, MeasureConfig(windows=len(tputs)))
    return PointResult("ok", "torch", "tiny", drafter, batch, params={"batch": batch}, metrics=metrics, windows=windows)


def test_each_batch_speedup_is_the_verdicts_paired_ratio_where_windows_took_turns() -> None:
    drift = [100.0, 200.0, 150.0, 120.0]  # the machine's drift, shared by partners
    spec = [d * r for d, r in zip(drift, [1.28, 1.31, 1.30, 1.32], strict=True)]
    rows = [measured("none", 4, drift, [0.0, 2.0, 4.0, 6.0]), measured("tiny", 4, spec, [1.0, 3.0, 5.0, 7.0])]
    rows += [measured("none", 8, drift, [10.0, 11.0, 12.0, 13.0]), measured("tiny", 8, spec, [14.0, 15.0, 16.0, 17.0])]
    found = breakeven.batch_speedups(rows)
    ones = [1.0] * 4
    assert found[4] == stats.arm_ratio((spec, ones), (drift, ones), True) and found[4].hi - found[4].lo < 0.1
    unpaired = analysis.used_ratios(rows)[3]["speedup"]  # one arm after the other: the unpaired ratio
    assert found[8] == unpaired and found[8].hi - found[8].lo > 0.3


def test_exact_curves_are_located_to_adjacent_batches_in_fewer_batches_than_bisection() -> None:
    search = Search(max_points=64)
    ours, baseline = [], []
    for curve in CURVES:
        truth = next(b for b in range(1, 64) if curve(b) >= 1 > curve(b + 1))
        for rule, used in ((median_rule, ours), (bisection_rule, baseline)):
            step, points = run_search(curve, rule, search)
            assert step.status == "located" and step.bracket == (truth, truth + 1), (rule.__name__, step)
            used.append(len(points))
    # on curves of the shape it interpolates (the first three) it needs the two ends and the two
    # batches around the crossing; bent ones cost it about what they cost bisection
    assert ours[:3] == [4, 4, 4] and all(b > 4 for b in baseline[:3]), (ours, baseline)
    assert sum(ours) < sum(baseline), (ours, baseline)


def test_noisy_curves_take_fewer_batches_and_keep_the_break_even_inside() -> None:
    """With ±0.05 on every speedup the break-even cannot be told to one batch: each rule stops when
    the noise allows no narrower interval; the median rule gets there in fewer batches, and the
    true break-even lies inside its 95% interval nearly always."""
    search = Search(max_points=64)
    ours, baseline, covered = [], [], 0
    for seed in range(8):
        for curve in CURVES:
            truth = next(
                b + (curve(b) - 1) / (curve(b) - curve(b + 1)) for b in range(1, 64) if curve(b) >= 1 > curve(b + 1)
            )
            step, points = run_search(curve, median_rule, search, half=0.05, seed=seed)
            assert step.status in ("located", "noise"), step
            ours.append(len(points))
            covered += step.lo <= truth <= step.hi + 1
            baseline.append(len(run_search(curve, bisection_rule, search, half=0.05, seed=seed)[1]))
    assert sum(ours) < sum(baseline), (sum(ours), sum(baseline))
    assert covered >= 0.85 * len(ours), covered


def test_both_ends_first_then_stops_outside_the_range() -> None:
    search = Search()
    assert next_step({}, search).batch == 1
    assert next_step({1: Estimate(1.4)}, search).batch == 64
    paying = {1: Estimate(1.4, 0.01, 2), 64: Estimate(1.1, 0.01, 2)}
    assert next_step(paying, search).status == "above"
    losing = {1: Estimate(0.8, 0.01, 2), 64: Estimate(0.5, 0.01, 2)}
    assert next_step(losing, search).status == "below"


def test_a_batch_that_breaks_the_curve_is_set_aside_and_not_measured_again() -> None:
    points = {
        1: Estimate(1.4, 0.02, 2),
        4: Estimate(1.2, 0.02, 2),
        5: Estimate(0.45, 0.02, 2),  # a dip far beyond both neighbours' intervals
        16: Estimate(0.85, 0.02, 2),
        64: Estimate(0.6, 0.02, 2),
    }
    step = next_step(points, Search(max_points=64))
    assert step.lo > 5 and step.batch not in points and 5 < step.batch < 16


def test_budget_ends_the_search_with_the_interval_so_far() -> None:
    step, points = run_search(log_linear(7.3), median_rule, Search(max_points=3), half=0.05)
    assert step.status == "budget" and len(points) == 3 and step.lo < 7.3 < step.hi


def test_no_batch_between_two_unclear_ones_is_worth_measuring_once_clear_ones_bound_them() -> None:
    points = {
        1: Estimate(1.3, 0.01, 2),
        6: Estimate(1.0, 0.02, 2),
        9: Estimate(0.99, 0.02, 2),
        64: Estimate(0.6, 0.01, 2),
    }
    options = breakeven.candidates(points, Search(), 1.5, 40.0)
    assert 7 not in options and 8 not in options
    assert {2, 5, 10, 39} <= set(options)
    unbounded = {**points, 64: Estimate(0.9, 0.2, 2)}  # nothing clear above the unclear zone
    assert {7, 8} <= set(breakeven.candidates(unbounded, Search(), 1.5, 40.0))


def test_the_answer_states_its_cost_against_the_grid() -> None:
    search = Search()
    text = breakeven.describe(Step(None, "located", 7.2, 7.9, (7, 8)), search, 5)
    assert text.startswith("break-even located between batch 7 and 8")
    assert "5 of 64 batches measured (10 points)" in text and "measures 64 (128 points)" in text
    assert len(Search(resolution=4).grid) == 17
    assert "when a point failed" in breakeven.describe(Step(None, "failed", 3.0, 9.0), search, 3)
    assert "did not finish" in breakeven.describe(Step(None, "searching"), search, 2)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"batch_min": 0}, "batch_min"),
        ({"batch_max": 1}, "batch_max"),
        ({"resolution": 0}, "resolution"),
        ({"max_points": 1}, "max_points"),
        ({"input_lens": [16, 16]}, "input_lens"),
        ({"input_lens": [0]}, "input_lens"),
    ],
)
def test_bad_settings_name_their_key(settings: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        CrossoverConf(**settings)
    assert err.value.key == f"hydra.sweeper.crossover.{key}" and "\n" not in str(err.value)


def test_unsettled_and_failed_batches_are_set_aside_and_said_so() -> None:
    drift = [100.0, 110.0, 105.0]
    rows = []
    for b, ratio in ((1, 1.4), (8, 1.02), (16, 0.9), (64, 0.6)):
        rows += [
            measured("none", b, drift, [0.0, 2.0, 4.0]),
            measured("tiny", b, [d * ratio for d in drift], [1.0, 3.0, 5.0]),
        ]
    rows[3].metrics["windows_settled"] = 0.0  # batch 8's drafter arm: a cap stopped it early
    rows[4] = PointResult("failed", "torch", "tiny", "none", 16, params={"batch": 16})
    found = believed(rows)
    assert found.aside == {8: UNSETTLED, 16: FAILED} and set(found.points) == {1, 64}
    assert found.measured == [1, 8, 16, 64]
    words = answer(Step(None, "budget", 2.0, 40.0), Search(), found)
    assert "4 of 64 batches measured" in words and "set aside: batch 8 (a cap stopped an arm" in words
    assert "batch 16 (an arm failed" in words


def test_a_set_aside_batch_spends_the_budget_but_never_steers() -> None:
    ends = {1: Estimate(1.4, 0.02, 2), 64: Estimate(0.6, 0.02, 2)}
    plain = steer(Believed(dict(ends)), Search(), set())
    assert plain.batch is not None
    aside = steer(Believed(dict(ends), {plain.batch: UNSETTLED}), Search(), {plain.batch})
    assert aside.batch not in (None, plain.batch) and aside.status == "searching"
    assert (aside.lo, aside.hi) == (plain.lo, plain.hi)  # the unsettled batch moved nothing
    spent = steer(Believed(dict(ends), {plain.batch: FAILED}), Search(max_points=3), {plain.batch})
    assert spent.status == "budget"
    end = steer(Believed({1: ends[1]}, {64: UNSETTLED}), Search(), {64})
    assert end.batch is None and end.status == UNSETTLED
    assert "when an end of the range did not settle" in answer(end, Search(), Believed({1: ends[1]}, {64: UNSETTLED}))


def test_the_search_goes_past_the_ends_and_a_resumed_one_measures_only_what_is_missing() -> None:
    """Batch 1 pays and 32 loses: the search measures inside until the budget; run again on the
    same folder with a larger budget it reads the points it holds back, makes the same choices from
    them and measures the one batch a fresh search with that budget would add (the live search's
    resume, tests/e2e/test_crossover.py)."""
    curve = log_linear(7.3)
    step, short = run_search(curve, median_rule, Search(batch_max=32, max_points=3), half=0.05)
    assert step.status == "budget" and len(short) == 3 and {1, 32} < set(short)
    resumed = steer(Believed(dict(short)), Search(batch_max=32, max_points=4), {1, 32})
    assert resumed.status == "searching" and resumed.batch not in short
    _, fresh = run_search(curve, median_rule, Search(batch_max=32, max_points=4), half=0.05)
    assert fresh.keys() - short.keys() == {resumed.batch} and set(short) < set(fresh)
    done = steer(Believed(dict(fresh)), Search(batch_max=32, max_points=4), set(fresh))
    assert done.batch is None and done.status == "budget"  # nothing measured twice


def test_measured_at_its_ends_alone_the_search_measures_the_middle_first() -> None:
    """A search once measured 1, 64, 15, 14, 10, 12: the interval from the two ends alone (a straight
    line in log batch) steered it to 10-15 and 2-9 went unmeasured. Measured at its ends alone it
    now measures the range's middle (log scale), whatever the ends read, then refines."""
    for top in (0.9, 0.6, 0.3):
        ends = {1: Estimate(1.3, 0.02, 2), 64: Estimate(top, 0.02, 2)}
        step = steer(Believed(dict(ends)), Search(), {1, 64})
        assert step.batch == 8 and step.status == "searching", (top, step)
        assert (step.lo, step.hi) == (next_step(ends, Search()).lo, next_step(ends, Search()).hi)  # said as before
    ends = {1: Estimate(1.3, 0.02, 2), 64: Estimate(0.9, 0.02, 2)}
    refined = steer(Believed({**ends, 8: Estimate(1.1, 0.02, 2)}), Search(), {1, 8, 64})
    assert refined.batch is not None and 8 < refined.batch < 64 and refined.lo >= 8  # then the rule steers
    failed = steer(Believed(dict(ends), {8: FAILED}), Search(), {1, 8, 64})
    assert failed.batch == 9  # the middle set aside: the batch nearest it (log scale)
    upto32 = Believed({1: ends[1], 32: ends[64]})
    assert steer(upto32, Search(batch_max=32), {1, 32}).batch == 6  # 2^2.5 = 5.7
