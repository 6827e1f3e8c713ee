"""Does stopping early keep 95%? Simulates points whose speedup is known, measured in window pairs that
take turns (log-normal noise on each window), and stops them in three ways:

- naive: after every window from ``measure.windows`` on, stop as soon as the plain 95% interval of the
  speedup excludes 1 (a decision) or is within ± rel_ci (the issue's "stopping at plain 95% looks");
- sequential: the same rule, but only at the pre-declared looks, each interval at its look's share of
  the 5% (specexp.metrics.sequential: O'Brien-Fleming spending, Bonferroni across looks);
- fixed: ``measure.max_windows`` windows, no early stop.

It prints, per truth, how often the reported interval holds the true speedup (coverage) and, with a
true speedup of exactly 1, how often the point was called "pays" or "loses" (false decisions), and
the mean windows spent.

Then arms stopped together (specexp.metrics.joint_stop): a baseline and two speculative arms taking
turns, each arm with noise of its own, all stopped at the first look where every speedup is within
± JOINT_REL_CI (the rule itself, window_results.speedups_precise), each speedup reported at that
look's level; against the same precision rule after every window at plain 95%, and a fixed count.
It prints each arm's coverage at a nominal 95%, how often both held, and the mean windows spent.
Figures only, not a test (tests/unit/test_sequential.py and test_joint_stop.py hold the rules).

    .venv/bin/python benchmarks/sequential_coverage.py [--points 2000]
"""

from __future__ import annotations

import argparse

import numpy as np

from specexp.config import MeasureConfig
from specexp.metrics.sequential import alpha_at, look_alphas, looks, widen
from specexp.metrics.stats import Estimate, arm_ratio
from specexp.metrics.window_results import speedups_precise

WINDOWS, MAX_WINDOWS, REL_CI = 8, 24, 0.03
NOISE = 0.06  # each window's log throughput spread around its arm's truth, the drift shared by partners removed
# Arms stopped together: (truth, own noise) for the baseline and two speculative arms, and the target.
ARMS = ((1.0, 0.04), (1.15, 0.03), (0.95, 0.06))
JOINT_REL_CI = 0.05


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


def joint(rng: np.random.Generator, how: str) -> tuple[list[Estimate], int]:
    """Three arms taking turns, stopped together: each speculative arm's reported speedup and the
    windows every arm spent."""
    drift = np.exp(rng.normal(0.0, 0.2, MAX_WINDOWS))
    tputs = [truth * drift * np.exp(rng.normal(0.0, sd, MAX_WINDOWS)) for truth, sd in ARMS]
    windows = [[{"output_throughput": float(t), "window_s": 1.0} for t in arm] for arm in tputs]
    measure = MeasureConfig(windows=WINDOWS, rel_ci=JOINT_REL_CI, max_windows=MAX_WINDOWS)
    checks = {"naive": range(WINDOWS, MAX_WINDOWS + 1), "sequential": looks(WINDOWS, MAX_WINDOWS)}.get(how)
    for n in checks or (MAX_WINDOWS,):
        plain = [speedup(arm[:n], tputs[0][:n]) for arm in tputs[1:]]
        if how == "sequential":
            if n == MAX_WINDOWS or speedups_precise(windows[0][:n], [w[:n] for w in windows[1:]], measure):
                return [widen(e, alpha_at(n, WINDOWS, MAX_WINDOWS)) for e in plain], n
        elif n == MAX_WINDOWS or all(e.half / e.value <= JOINT_REL_CI for e in plain):
            return plain, n
    raise AssertionError("the last check always stops")


def run_joint(points: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    print(f"\narms stopped together on their speedups, rel_ci {JOINT_REL_CI}; (truth, own noise) per arm: {ARMS}")
    print(f"{'stopping':>11} {'coverage A':>11} {'coverage B':>11} {'both':>7} {'mean windows':>13}")
    for how in ("naive", "sequential", "fixed"):
        covered, spent = np.zeros(len(ARMS) - 1), 0
        both = 0
        for _ in range(points):
            found, n = joint(rng, how)
            hit = [e.lo <= truth <= e.hi for e, (truth, _) in zip(found, ARMS[1:], strict=True)]
            covered += hit
            both += all(hit)
            spent += n
        a, b = covered / points
        print(f"{how:>11} {a:>11.1%} {b:>11.1%} {both / points:>7.1%} {spent / points:>13.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    run(args.points, args.seed)
    run_joint(args.points, args.seed)
    print("(joint classes and break-even: benchmarks/joint_coverage.py)")


if __name__ == "__main__":
    main()
