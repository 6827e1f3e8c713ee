"""How often does the verdict agree with itself? The default envelope sweep, run N times.

Runs `python -m specexp drafter=none,tiny batch=1,4,8,16 -m` (the README's envelope on the reference
engine) N times with the default settings and N times with `measure.rel_ci=0.03` (and, with
`--settings sequential`, one server after the other, `arms=sequential`; with `--settings repeats`,
`repeats=3`: three interleaved launches per point), each in a fresh
folder, and reads every sweep's break-even interval back from its points' results.json (the same
analysis the sweep ran). Three figures per setting:

- agree: the most runs whose 95% break-even intervals share a batch (goal: 9 of 10);
- pairs: the share of pairs of runs whose intervals overlap;
- informative: the runs whose interval is not (-inf, +inf), which agrees with anything and says
  nothing ("+inf, +inf": speculation pays at every measured batch, is a definite answer).

An interval may be open ("break-even above 12": +inf) when in more than 2.5% of its draws speculation
paid at every batch; open ends overlap like any other. Figures only, not a test.

    .venv/bin/python benchmarks/verdict_stability.py [--n 10] [--settings default,rel_ci] [--keep DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from specexp.report.analysis import apply
from specexp.result import PointResult

ENVELOPE = ["drafter=none,tiny", "batch=1,4,8,16", "tracking.enabled=false"]
# default: 3 windows per point, the arms taking turns at each batch (arms=auto on CPU); sequential:
# one server after the other (the arms' order before arms existed); rel_ci: windows until ±3%;
# repeats: every point on 3 interleaved launches
SETTINGS = {
    "default": [],
    "sequential": ["arms=sequential"],
    "rel_ci": ["measure.rel_ci=0.03"],
    "repeats": ["repeats=3"],
}


@dataclass
class Outcome:
    crossover: float | None
    lo: float
    hi: float
    verdict: str
    seconds: float


def run_sweep(workdir: Path, extra: list[str], outputs: Path) -> Outcome:
    """One envelope sweep in ``workdir``; its break-even from the points it wrote."""
    argv = [sys.executable, "-m", "specexp", *ENVELOPE, *extra, f"hydra.sweep.dir={workdir}/multirun", "-m"]
    env = {**os.environ, "SPECEXP_OUTPUTS": str(outputs)}
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"sweep failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    results = [
        PointResult.from_json(json.loads(p.read_text())) for p in sorted((workdir / "multirun").glob("*/results.json"))
    ]
    (series,) = apply(results).series
    verdict = (workdir / "multirun" / "verdict.txt").read_text().strip()
    return Outcome(series.crossover, series.lo, series.hi, verdict, seconds)


def most_agreeing(intervals: list[tuple[float, float]]) -> int:
    """The largest number of closed intervals that share a point (a sweep over their ends)."""
    events = sorted([(lo, 0) for lo, _ in intervals] + [(hi, 1) for _, hi in intervals])
    best = open_now = 0
    for _, kind in events:  # starts sort before ends at the same x: touching intervals overlap
        open_now += 1 if kind == 0 else -1
        best = max(best, open_now)
    return best


def overlapping_pairs(intervals: list[tuple[float, float]]) -> tuple[int, int]:
    pairs = list(itertools.combinations(intervals, 2))
    return sum(a_lo <= b_hi and b_lo <= a_hi for (a_lo, a_hi), (b_lo, b_hi) in pairs), len(pairs)


def bound(x: float) -> str:
    return f"{x:.1f}" if math.isfinite(x) else ("-inf" if x < 0 else "+inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10, help="sweeps per setting")
    parser.add_argument("--settings", default="default,rel_ci", help=f"some of {','.join(SETTINGS)}")
    parser.add_argument("--keep", type=Path, help="keep the sweeps' folders here (default: a temporary folder)")
    parser.add_argument("--outputs", type=Path, default=Path(os.environ.get("SPECEXP_OUTPUTS", "outputs")))
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="verdict-stability-"))
    summary = []
    for name in args.settings.split(","):
        outcomes = []
        for i in range(args.n):
            workdir = root / name / str(i)
            workdir.mkdir(parents=True, exist_ok=True)
            outcome = run_sweep(workdir, SETTINGS[name], args.outputs.resolve())
            outcomes.append(outcome)
            point = f"{outcome.crossover:.1f}" if outcome.crossover is not None else "-"
            print(
                f"{name} {i + 1}/{args.n}: break-even {point} [{bound(outcome.lo)}, {bound(outcome.hi)}] "
                f"in {outcome.seconds:.0f} s, load average {os.getloadavg()[0]:.1f} | {outcome.verdict}",
                flush=True,
            )
        intervals = [(o.lo, o.hi) for o in outcomes]
        agree = most_agreeing(intervals)
        hit, pairs = overlapping_pairs(intervals)
        estimates = [o.crossover for o in outcomes if o.crossover is not None]
        informative = sum((lo, hi) != (-math.inf, math.inf) for lo, hi in intervals)
        spread = f"{min(estimates):.1f}-{max(estimates):.1f}" if estimates else "-"
        summary.append(
            f"{name:8s} n={args.n}: {agree} of {args.n} intervals share a batch; {hit} of {pairs} pairs overlap; "
            f"{informative} of {args.n} informative; "
            f"point estimates {spread}; {sum(o.seconds for o in outcomes) / len(outcomes):.0f} s per sweep"
        )
    print("\n" + "\n".join(summary))
    print(f"sweeps kept in {root}" if args.keep else "")


if __name__ == "__main__":
    main()
