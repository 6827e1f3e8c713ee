"""What does the adaptive break-even search save? It against the grid, on the reference engine.

Runs, one after the other, N times each in turn: the search (``+sweep=crossover drafter=tiny``, batch
1..64, its default budget) and the grid of every power of two and the midpoints between them
(``drafter=none,tiny batch=1,2,3,4,6,8,12,16,24,32,48,64``), both with small points (16-token prompts
and outputs), in fresh folders without tracking. Per run pair it prints the batches each measured,
its wall time (server starts included), the search's answer and 95% interval (crossover.csv) and
the grid's (its verdict's analysis), whether the search's point estimate lies inside the grid's
interval and whether the intervals overlap. Figures only, not a test.

    .venv/bin/python benchmarks/crossover_cost.py [--n 5] [--keep DIR] [--outputs DIR] [--max-points 6]
"""

from __future__ import annotations

import argparse
import csv
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
from specexp.report.crossing import crossover
from specexp.report.crossover_points import believed
from specexp.result import PointResult

GRID = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]
SMALL = ["workload.output_len=16", "workload.input_len=16", "tracking.enabled=false"]


@dataclass
class Outcome:
    batches: int
    seconds: float
    point: float | None  # the break-even's point estimate
    lo: float
    hi: float
    status: str = ""


def _run(workdir: Path, argv: list[str], outputs: Path) -> tuple[list[PointResult], float]:
    workdir.mkdir(parents=True, exist_ok=True)
    full = [sys.executable, "-m", "specexp", *argv, *SMALL, f"hydra.sweep.dir={workdir}/multirun", "-m"]
    start = time.monotonic()
    proc = subprocess.run(
        full, cwd=workdir, env={**os.environ, "SPECEXP_OUTPUTS": str(outputs)}, capture_output=True, text=True
    )
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    paths = sorted((workdir / "multirun").glob("*/results.json"))
    return [PointResult.from_json(json.loads(p.read_text())) for p in paths], seconds


def adaptive(workdir: Path, outputs: Path, max_points: int) -> Outcome:
    rows, seconds = _run(
        workdir, ["+sweep=crossover", "drafter=tiny", f"hydra.sweeper.crossover.max_points={max_points}"], outputs
    )
    (row,) = csv.DictReader((workdir / "multirun" / "crossover.csv").open())
    points = believed(rows).settled  # as the search read them: set-aside batches left out
    point = crossover([(b, e.value) for b, e in points.items()])
    return Outcome(int(row["batches"]), seconds, point, float(row["lo"]), float(row["hi"]), row["status"])


def grid(workdir: Path, outputs: Path) -> Outcome:
    rows, seconds = _run(workdir, ["drafter=none,tiny", f"batch={','.join(map(str, GRID))}"], outputs)
    (series,) = apply(rows).series
    return Outcome(len(GRID), seconds, series.crossover, series.lo, series.hi)


def bound(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.1f}" if math.isfinite(x) else ("-inf" if x < 0 else "+inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5, help="pairs of runs (search, then grid)")
    parser.add_argument("--max-points", type=int, default=6, help="the search's budget in batches")
    parser.add_argument("--keep", type=Path, help="keep the sweeps' folders here (default: a temporary folder)")
    parser.add_argument("--outputs", type=Path, default=Path(os.environ.get("SPECEXP_OUTPUTS", "outputs")))
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="crossover-cost-"))
    pairs = []
    for i in range(args.n):
        a = adaptive(root / f"adaptive{i}", args.outputs.resolve(), args.max_points)
        g = grid(root / f"grid{i}", args.outputs.resolve())
        inside = a.point is not None and g.lo <= a.point <= g.hi
        overlap = a.lo <= g.hi and g.lo <= a.hi
        pairs.append((a, g, inside, overlap))
        print(
            f"run {i + 1}/{args.n}: search {a.batches} batches in {a.seconds:.0f} s ({a.status}), break-even "
            f"{bound(a.point)} [{bound(a.lo)}, {bound(a.hi)}] | grid {g.batches} batches in {g.seconds:.0f} s, "
            f"{bound(g.point)} [{bound(g.lo)}, {bound(g.hi)}] | inside {inside}, overlap {overlap} | "
            f"load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    n = len(pairs)
    print(
        f"\nsearch: {sum(a.batches for a, *_ in pairs) / n:.1f} batches, {sum(a.seconds for a, *_ in pairs) / n:.0f} s "
        f"per run; grid: {len(GRID)} batches, {sum(g.seconds for _, g, *_ in pairs) / n:.0f} s per run; "
        f"search's estimate inside the grid's interval in {sum(p[2] for p in pairs)} of {n}, "
        f"intervals overlap in {sum(p[3] for p in pairs)} of {n}"
    )
    print(f"sweeps kept in {root}" if args.keep else "")


if __name__ == "__main__":
    main()
