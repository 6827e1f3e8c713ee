"""Does stopping early keep 95%? Simulates points whose speedup is known, measured in window pairs that
take turns (log-normal noise on each window), and stops them in three ways:

- naive: after every window from ``measure.windows`` on, stop as soon as the plain 95% interval of the
  speedup excludes 1 (a decision) or is within ± rel_ci (the issue's "stopping at plain 95% looks");
- sequential: the same rule, but only at the pre-declared looks, each interval at its look's share of
  the 5% (specexp.metrics.sequential: O'Brien-Fleming spending, Bonferroni across looks);
- fixed: ``measure.max_windows`` windows, no early stop.

It prints, per truth, how often the reported interval holds the true speedup (coverage) and, with a
true speedup of exactly 1, how often the point was called "pays" or "loses" (false decisions), and
the mean windows spent. Figures only, not a test (tests/unit/test_sequential.py holds the rules).

    .venv/bin/python benchmarks/sequential_coverage.py [--points 2000]
"""

from __future__ import annotations

import argparse

import numpy as np

from specexp.metrics.sequential import look_alphas, looks, widen
from specexp.metrics.stats import Estimate, arm_ratio

WINDOWS, MAX_WINDOWS, REL_CI = 8, 24, 0.03
NOISE = 0.06  # each window's log throughput spread around its arm's truth, the drift shared by partners removed


def speedup(spec: np.ndarray, base: np.ndarray) -> Estimate:
    seconds = np.ones(spec.size)
    return arm_ratio((spec, seconds), (base, seconds), paired=True)


def done(est: Estimate) -> bool:
    """Decided (its interval excludes 1) or precise enough (± REL_CI)."""
    return est.lo > 1 or est.hi < 1 or est.half / est.value <= REL_CI


def measure(truth: float, rng: np.random.Generator, how: str) -> tuple[Estimate, int]:
    """One point's reported speedup and the windows it spent."""
    drift = np.exp(rng.normal(0.0, 0.2, MAX_WINDOWS))  # the machine's state, shared by partners
    spec = truth * drift * np.exp(rng.normal(0.0, NOISE, MAX_WINDOWS))
    base = drift * np.exp(rng.normal(0.0, NOISE, MAX_WINDOWS))
    schedule = looks(WINDOWS, MAX_WINDOWS)
    shares = dict(zip(schedule, look_alphas(schedule), strict=True))
    checks = {"naive": range(WINDOWS, MAX_WINDOWS + 1), "sequential": schedule, "fixed": (MAX_WINDOWS,)}[how]
    for n in checks:
        est = speedup(spec[:n], base[:n])
        if how == "sequential":
            est = widen(est, shares[n])
        if n == MAX_WINDOWS or done(est):
            return est, n
    raise AssertionError("the last check always stops")


def run(points: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    print(f"{points} points per row; windows {WINDOWS} to {MAX_WINDOWS}, rel_ci {REL_CI}, noise {NOISE} per window")
    print(f"looks: {looks(WINDOWS, MAX_WINDOWS)}")
    print(f"{'truth':>6} {'stopping':>11} {'coverage':>9} {'false pays/loses':>17} {'mean windows':>13}")
    for truth in (1.0, 0.9, 1.15):
        for how in ("naive", "sequential", "fixed"):
            covered = wrong = spent = 0
            for _ in range(points):
                est, n = measure(truth, rng, how)
                covered += est.lo <= truth <= est.hi
                wrong += truth == 1.0 and (est.lo > 1 or est.hi < 1)
                spent += n
            false = f"{wrong / points:.1%}" if truth == 1.0 else "-"
            print(f"{truth:>6} {how:>11} {covered / points:>9.1%} {false:>17} {spent / points:>13.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    run(args.points, args.seed)
    print("(joint classes and break-even: benchmarks/joint_coverage.py)")


if __name__ == "__main__":
    main()
