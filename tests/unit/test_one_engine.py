"""One interval engine: over 10,000 random synthetic sweeps, a verdict's classes and its break-even
interval, drawn from the same distributions, never contradict each other.

What the words promise, per batch x of a sweep (classes as verdict.verdict_class decides them, the
break-even's 95% bounds L-H as crossing.crossover_interval draws them):

- not "pays" at x ("no measurable difference" or "loses"): the break-even is not stated above x
  (L <= x), so "break-even above 2.8" never sits beside "no measurable difference at batch 2";
- not "loses" at x ("pays" or "no measurable difference"): the break-even is not stated below x
  (H >= x), so "break-even below 6.9" never sits beside "no measurable difference at batch 8";
- hence not "pays" at the first batch: no lower bound is stated (L = -inf); not "loses" at the last
  batch: no upper bound (H = +inf).
"""

from __future__ import annotations

import math

import numpy as np

from specexp.metrics.stats import Estimate, side
from specexp.report.crossing import crossover_interval

SWEEPS = 10_000
# quantiles at k / 40: the smallest draw is the 2.5% quantile (the 100th of the default 3999 is); the rules
# hold on any such grid, and a small one keeps 10,000 sweeps within a unit test's time
DRAWS = 39


def random_point(rng: np.random.Generator, centre: float) -> Estimate:
    """A speedup near ``centre``, linear or log, with few or fractional degrees of freedom."""
    u = rng.random(5)
    value = math.exp(centre + 0.15 * rng.standard_normal())
    spread = 0.002 + 0.05 * u[0] if u[1] < 0.5 else 0.01 + 0.4 * u[0]
    df = (1.0, 2.0, 2.0, 3.0, 4.0, 1.0 + 11.0 * u[2])[int(6 * u[3])]
    return Estimate(value, spread, df, "log") if u[4] < 0.5 else Estimate(value, spread * value, df)


def test_classes_and_break_even_never_contradict() -> None:
    rng = np.random.default_rng(20)
    checked = {"not_pays": 0, "not_loses": 0, "finite_lo": 0, "finite_hi": 0, "both": 0}
    for _ in range(SWEEPS):
        xs = sorted(rng.choice([1, 2, 4, 8, 16, 32, 64], size=int(rng.integers(2, 6)), replace=False))
        # half the sweeps fall along the batch as real ones do, half wander around 1
        start, slope = (rng.normal(0.3, 0.3), rng.uniform(-0.4, 0.0)) if rng.random() < 0.5 else (0.0, 0.0)
        points = {float(x): random_point(rng, start + slope * math.log2(x)) for x in xs}
        lo, hi = crossover_interval(points, draws=DRAWS)
        assert lo <= hi
        classes = {x: side(p, draws=DRAWS) for x, p in points.items()}
        for x, cls in classes.items():
            if cls < 1:  # no measurable difference, or loses
                assert lo <= x, (points, lo, hi, x)
                checked["not_pays"] += 1
            if cls > -1:  # pays, or no measurable difference
                assert hi >= x, (points, lo, hi, x)
                checked["not_loses"] += 1
        if classes[xs[0]] < 1:
            assert lo == -math.inf
        if classes[xs[-1]] > -1:
            assert hi == math.inf
        checked["finite_lo"] += math.isfinite(lo)
        checked["finite_hi"] += math.isfinite(hi)
        checked["both"] += math.isfinite(lo) and math.isfinite(hi)
    # the sweeps exercised every rule, many times over
    assert min(checked.values()) > 100, checked
