"""Several batches at once: a verdict's classes (and its break-even) hold jointly at 95% over a series'
points (issue 33, item 4). Four batches each judged at 95% alone say at least one false "pays" or
"loses" up to 18.5% of the time; Bonferroni's simultaneous intervals keep it at 5% or below."""

import math

import numpy as np
import pytest
from scipy import stats

from specexp.metrics.stats import Estimate, arm_ratio, side
from specexp.report.analysis import AXES, Series, apply
from specexp.report.crossing import crossing_bounds, crossover, crossover_interval, first_crossings
from specexp.report.verdict import PAYS, SAME, describe, verdict_class, verdicts
from tests.unit.test_analysis import row


def test_a_class_one_batch_alone_would_give_is_not_claimed_jointly() -> None:
    # a speedup whose 95% interval alone just excludes 1 (p = 0.02 over 7 pairs), not at 1 - 5% / 4
    se = math.log(1.06) / stats.t.ppf(0.99, 7)
    est = Estimate(1.06, se, 7, "log")
    assert verdict_class(est) == PAYS and verdict_class(est, family=4) == SAME
    s = Series("tiny", AXES["closed"], "crossover_batch.tiny", {float(b): est for b in (1, 2, 4, 8)}, family=4)
    assert describe(s).startswith("tiny: no measurable difference at batch 1, 2, 4, 8")


def test_joint_classes_hold_at_95_percent_over_four_null_batches() -> None:
    """Known truth: four batches whose speedup is exactly 1, each measured in 8 window pairs (the paired
    ratio of sums, t on the log scale); a false class at any of them counts against the sweep."""
    rng = np.random.default_rng(11)
    sweeps, alone, joint = 1500, 0, 0
    for _ in range(sweeps):
        ones = np.ones(8)
        ests = [arm_ratio((np.exp(rng.normal(0.0, 0.05, 8)), ones), (ones, ones), True) for _ in range(4)]
        alone += any(side(e, draws=399) != 0 for e in ests)
        joint += any(side(e, draws=399, family=4) != 0 for e in ests)
    assert alone / sweeps > 0.12  # about 1 - 0.95^4 = 18.5%
    assert joint / sweeps <= 0.06  # at most 5%, up to the simulation's noise


def test_the_break_even_is_the_first_crossing_and_says_when_a_later_batch_is_undecided() -> None:
    """The issue's line: "loses at batch 8 … break-even above 2.5", no upper end because batch 16 was
    inconclusive and the upper bound was the last crossing."""
    speedups = {1: 1.3, 2: 1.2, 4: 1.1, 8: 0.7, 16: 0.9}
    rows = [row("none", b, 100.0 * b, rel_ci=0.02) for b in speedups]
    rows += [row("tiny", b, 100.0 * b * s, rel_ci=0.02 if b < 16 else 0.4) for b, s in speedups.items()]
    line, how = verdicts(rows, apply(rows))
    assert "loses at batch 8" in line and "no measurable difference at batch 16" in line
    assert (
        "; break-even between 4.4 and 5.0 (first crossing, 95%); undecided at batch 16: the speedup may cross 1 "
        "again beyond the last measured point; " in line
    )
    assert "hold jointly at 95% over each series' 5 points (Bonferroni: each class at 99.0% " in how


def test_the_break_even_holds_a_curve_that_falls_by_a_constant_factor_per_doubling() -> None:
    """Known truth: log speedup linear in log2(batch) through 1 at batch 7, measured tightly at 4 and 16
    alone. Interpolated linearly in the speedup the crossing reads 7.7 and an interval of the draws
    alone misses 7; the interval holds both shapes, so it holds the truth (benchmarks/joint_coverage.py:
    2 batches, 90% before, 99% after)."""
    truth = {x: math.exp(-0.3 * (math.log2(x) - math.log2(7.0))) for x in (4.0, 16.0)}
    points = {x: Estimate(v, 0.005, 7, "log") for x, v in truth.items()}
    lo, hi = crossover_interval(points)
    assert crossover(list(truth.items())) == pytest.approx(7.74, abs=0.01) and lo <= 7.0 <= hi < 8.0
    early, late = first_crossings(points)
    assert crossing_bounds(early, late) == pytest.approx((lo, hi))  # it crosses once: first = whole
