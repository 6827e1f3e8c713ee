"""How often do a verdict's classes and its break-even hold, at a nominal 95%? Simulates sweeps with a
known speedup curve (linear in log2(batch), or exactly 1 everywhere), measures each batch as the verdict
does (the paired ratio of 8 window pairs, log-normal noise), and counts:

- joint classes: sweeps where no batch is called "pays" with a true speedup at or below 1, or "loses"
  with one at or above 1 (a "no measurable difference" is never wrong), judged each batch at 95% alone
  (family 1) and jointly over the series (Bonferroni, family m: what the verdict does);
- break-even: sweeps whose true first crossing lies in the verdict's first-crossing interval.

Figures only, not a test (tests/unit/test_joint_classes.py holds the property test).

    .venv/bin/python benchmarks/joint_coverage.py [--sweeps 1000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from specexp.metrics.stats import Estimate, arm_ratio, side
from specexp.report.crossing import crossing_bounds, crossing_draws, first_crossings

PAIRS = 8  # windows per arm, taking turns
NOISE = 0.06  # the spread of one window pair's log ratio
BATCHES = {1: (8.0,), 2: (4.0, 16.0), 4: (2.0, 4.0, 8.0, 16.0), 8: tuple(2.0**k for k in range(8))}


def measured(truth: float, rng: np.random.Generator) -> Estimate:
    """A point's paired speedup from PAIRS window pairs around ``truth``."""
    ones = np.ones(PAIRS)
    return arm_ratio((truth * np.exp(rng.normal(0.0, NOISE, PAIRS)), ones), (ones, ones), paired=True)


def first_crossing(xs: tuple[float, ...], cross: float) -> float | None:
    """The true curve's first crossing, as the verdict interpolates it; None when it never crosses
    within the measured batches (or is below 1 from the first one)."""
    return cross if xs[0] < cross <= xs[-1] else None


def run(sweeps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    print(f"{sweeps} sweeps per row, {PAIRS} window pairs per point, noise {NOISE} on the log ratio")
    print(f"{'batches':>7} {'truth':>7} {'classes alone':>14} {'classes jointly':>16} {'break-even':>11}")
    for m, xs in BATCHES.items():
        for truth_kind in ("null", "slope"):
            alone = joint = covered = crossings = 0
            for _ in range(sweeps):
                if truth_kind == "null":
                    cross = math.inf
                    truths = {x: 1.0 for x in xs}
                else:
                    slope = rng.uniform(-0.3, -0.05)  # log speedup per doubling
                    cross = 2 ** rng.uniform(math.log2(xs[0]), math.log2(xs[-1]) + 1)
                    truths = {x: math.exp(slope * (math.log2(x) - math.log2(cross))) for x in xs}
                points = {x: measured(t, rng) for x, t in truths.items()}

                def wrong(family: int, points: dict = points, truths: dict = truths) -> bool:
                    sides = {x: side(p, family=family) for x, p in points.items()}
                    return any(s * (truths[x] - 1.0) <= 0 and s != 0 for x, s in sides.items())

                alone += wrong(1)
                joint += wrong(len(xs))
                true_cross = first_crossing(xs, cross)
                if m > 1 and true_cross is not None:
                    first, last = crossing_draws(points)
                    lo, _ = crossing_bounds(first, last, len(xs))
                    _, first_hi = crossing_bounds(*first_crossings(points), len(xs))
                    crossings += 1
                    covered += lo <= true_cross <= first_hi
            be = f"{covered / crossings:.1%}" if crossings else "-"
            print(f"{m:>7} {truth_kind:>7} {1 - alone / sweeps:>14.1%} {1 - joint / sweeps:>16.1%} {be:>11}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweeps", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    run(args.sweeps, args.seed)


if __name__ == "__main__":
    main()
