"""How often does the verdict agree with itself? The default envelope sweep, run N times.

Runs `python -m specexp drafter=none,tiny batch=1,4,8,16 -m` (the README's envelope on the reference
engine) N times with the default settings and N times with `measure.rel_ci=0.03` (and, with
`--settings sequential`, one server after the other, `arms=sequential`; with `--settings repeats`,
`repeats=3`: three interleaved launches per point), each in a fresh
folder, and reads every sweep's break-even interval back from its points' results.json (the same
analysis the sweep ran). Figures per setting:

- agree: the most runs whose 95% break-even intervals share a batch (goal: 9 of 10);
- pairs: the share of pairs of runs whose intervals overlap;
- informative: the runs whose interval is not (-inf, +inf), which agrees with anything and says
  nothing ("+inf, +inf": speculation pays at every measured batch, is a definite answer);
- batch 1 pays: the runs that class batch 1 "pays" (goal: 9 of 10), and how many runs' batch-1
  speedup intervals share a value;
- paired / unpaired: the median, over every speculative point of every run, of the paired speedup
  interval's half-width over the unpaired one's (goal: at most 1/3), and how many points were paired;
  the median correlation of partner windows' log throughputs (pairing narrows by about sqrt(1 - r));
- host load: per run, the mean 1-minute load average per core over its points' windows (and the
  load client's highest share of a core).

An interval may be open ("break-even above 12": +inf) when in more than 2.5% of its draws speculation
paid at every batch; open ends overlap like any other. Figures only, not a test.

    .venv/bin/python benchmarks/verdict_stability.py [--n 10] [--settings default,rel_ci] [--keep DIR] [--reread]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from scipy import stats

from specexp.report.analysis import alternated, apply
from specexp.report.verdict import PAYS, times, verdict_class, verdicts
from specexp.result import PointResult

ENVELOPE = ["drafter=none,tiny", "batch=1,4,8,16", "tracking.enabled=false"]
# default: 8 short windows per point, the arms taking turns at each batch (arms=auto on CPU: A B | B A);
# sequential: one server after the other (the arms' order before arms existed); rel_ci: windows until
# ±3%; repeats: every point on 3 interleaved launches; windows3: three short windows per point (two
# pairs' worth of degrees of freedom, as the default had before)
SETTINGS = {
    "default": [],
    "sequential": ["arms=sequential"],
    "rel_ci": ["measure.rel_ci=0.03"],
    "repeats": ["repeats=3"],
    "windows3": ["measure.windows=3"],
}


@dataclass
class Outcome:
    crossover: float | None
    lo: float
    hi: float
    verdict: str
    seconds: float
    batch1: str  # its class at batch 1
    batch1_interval: tuple[float, float]
    batch1_text: str
    widths: list[tuple[float, float]]  # per speculative point: (paired half-width, unpaired half-width)
    correlations: list[float]  # per paired point: its partner windows' log-throughput correlation
    paired: int  # speculative points whose speedup was paired
    points: int
    host_load: float  # mean load average per core over the points
    client_cpu: float  # the load client's highest share of a core


def run_sweep(workdir: Path, extra: list[str], outputs: Path) -> None:
    """One envelope sweep in ``workdir``; how long it took goes to ``seconds.txt`` beside it."""
    argv = [sys.executable, "-m", "specexp", *ENVELOPE, *extra, f"hydra.sweep.dir={workdir}/multirun", "-m"]
    env = {**os.environ, "SPECEXP_OUTPUTS": str(outputs)}
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True)
    (workdir / "seconds.txt").write_text(f"{time.monotonic() - start:.1f}\n")
    if proc.returncode != 0:
        raise RuntimeError(f"sweep failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


def read_sweep(workdir: Path) -> Outcome:
    """A sweep's break-even, batch-1 class and interval widths from the points it wrote, by the
    analysis of this checkout (so that kept sweeps can be read again: --reread)."""
    seconds = float((workdir / "seconds.txt").read_text()) if (workdir / "seconds.txt").exists() else math.nan
    results = [
        PointResult.from_json(json.loads(p.read_text())) for p in sorted((workdir / "multirun").glob("*/results.json"))
    ]
    analysis = apply(results)
    (series,) = analysis.series
    verdict = " | ".join(verdicts(results, analysis))
    first = series.points[min(series.points)]
    spec = [r for r in results if r.speculative and "speedup" in r.metrics]
    widths = [
        (r.metrics["speedup_ci95"], r.metrics["speedup_unpaired_ci95"])
        for r in spec
        if "speedup_ci95" in r.metrics and "speedup_unpaired_ci95" in r.metrics
    ]
    bases = {r.batch: r for r in results if not r.speculative}
    correlations = [c for r in spec if (c := partner_correlation(r, bases.get(r.batch))) is not None]
    cpus = float(os.cpu_count() or 1)
    loads = [r.metrics["host_load1"] / cpus for r in results if "host_load1" in r.metrics]
    return Outcome(
        series.crossover,
        series.lo,
        series.hi,
        verdict,
        seconds,
        verdict_class(first),
        (first.lo, first.hi),
        times(first),
        widths,
        correlations,
        sum(r.tags.get("specexp.speedup_method") == "paired" for r in spec),
        len(spec),
        sum(loads) / len(loads) if loads else math.nan,
        max((r.metrics.get("client_cpu", 0.0) for r in results), default=0.0),
    )


def partner_correlation(row: PointResult, base: PointResult | None) -> float | None:
    """Pearson's r (scipy) between the log output throughputs of a point's windows and their partners'
    in its baseline: pairing narrows the interval by about sqrt(1 - r), so it says how much of the
    windows' noise the partners share. None where the windows did not take turns."""
    n = 0 if base is None else alternated(row.windows, base.windows)
    if n < 3:
        return None
    a, b = ([math.log(w["output_throughput"]) for w in p.windows[:n]] for p in (row, base))
    return float(stats.pearsonr(a, b).statistic)


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
    parser.add_argument("--reread", action="store_true", help="run nothing: read the sweeps kept in --keep again")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="verdict-stability-"))
    summary = []
    for name in args.settings.split(","):
        outcomes = []
        for i in range(args.n):
            workdir = root / name / str(i)
            if not args.reread:
                workdir.mkdir(parents=True, exist_ok=True)
                run_sweep(workdir, SETTINGS[name], args.outputs.resolve())
            outcome = read_sweep(workdir)
            outcomes.append(outcome)
            point = f"{outcome.crossover:.1f}" if outcome.crossover is not None else "-"
            print(
                f"{name} {i + 1}/{args.n}: break-even {point} [{bound(outcome.lo)}, {bound(outcome.hi)}]; batch 1 "
                f"{outcome.batch1} {outcome.batch1_text}; {outcome.paired} of {outcome.points} points paired; "
                f"host load {outcome.host_load:.2f} per core (client {outcome.client_cpu:.0%} of a core) "
                f"in {outcome.seconds:.0f} s | {outcome.verdict}",
                flush=True,
            )
        intervals = [(o.lo, o.hi) for o in outcomes]
        agree = most_agreeing(intervals)
        hit, pairs = overlapping_pairs(intervals)
        estimates = [o.crossover for o in outcomes if o.crossover is not None]
        informative = sum((lo, hi) != (-math.inf, math.inf) for lo, hi in intervals)
        spread = f"{min(estimates):.1f}-{max(estimates):.1f}" if estimates else "-"
        pays = sum(o.batch1 == PAYS for o in outcomes)
        batch1_agree = most_agreeing([o.batch1_interval for o in outcomes])
        ratios = sorted(p / u for o in outcomes for p, u in o.widths if u > 0)
        median = statistics.median(ratios) if ratios else math.nan
        paired = sum(o.paired for o in outcomes)
        found = [c for o in outcomes for c in o.correlations]
        correlation = statistics.median(found) if found else math.nan
        points = sum(o.points for o in outcomes)
        loads = ", ".join(f"{o.host_load:.2f}" for o in outcomes)
        summary.append(
            f"{name:8s} n={args.n}: {agree} of {args.n} break-even intervals share a batch; {hit} of {pairs} pairs "
            f"overlap; {informative} of {args.n} informative; point estimates {spread}; batch 1 pays in {pays} of "
            f"{args.n} ({batch1_agree} of {args.n} batch-1 intervals share a value); paired/unpaired half-width "
            f"median {median:.2f} over {len(ratios)} points ({paired} of {points} paired; partner windows' "
            f"correlation median {correlation:.2f}); host load per core by "
            f"run: {loads}; {sum(o.seconds for o in outcomes) / len(outcomes):.0f} s per sweep"
        )
    print("\n" + "\n".join(summary))
    print(f"sweeps kept in {root}" if args.keep else "")


if __name__ == "__main__":
    main()
