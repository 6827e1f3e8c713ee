"""How close to its timestamps does specexp send a replayed trace? Writes a Mooncake-layout trace
(Poisson arrivals at --rate for --seconds, lengths drawn around --input-len/--output-len), replays it
with load=trace on the reference engine (model=tiny, drafter=none, one window), and prints the send
lateness (send - scheduled arrival) median, p90 and max, whether the median is within 5 ms (issue 36's
goal), and how many requests got the output length the trace asked.

    .venv/bin/python benchmarks/replay_lateness.py [--rate 4] [--seconds 15] [--time-scale 1]
        [--outputs outputs] [--extra key=value ...]

Figures only, not a test: lateness is the client's event loop and the machine's load, so it is
printed with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def write_trace(path: Path, rate: float, seconds: float, input_len: int, output_len: int) -> int:
    """A Mooncake JSONL of Poisson arrivals; returns its request count."""
    rng = np.random.default_rng(0)
    times = np.cumsum(rng.exponential(1 / rate, size=int(rate * seconds * 2) + 8))
    times = times[times < seconds]
    with path.open("w") as f:
        for t in times:
            row = {
                "timestamp": int(t * 1e3),
                "input_length": int(rng.integers(input_len // 2, input_len + 1)),
                "output_length": int(rng.integers(output_len // 2, output_len + 1)),
            }
            f.write(json.dumps(row) + "\n")
    return len(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=4.0)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=16)
    ap.add_argument("--outputs", default="outputs", help="specexp's outputs folder (built models)")
    ap.add_argument("--extra", nargs="*", default=[], help="more overrides, e.g. drafter=tiny")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="specexp-replay-") as scratch:
        trace = Path(scratch) / "trace.jsonl"
        n = write_trace(trace, args.rate, args.seconds, args.input_len, args.output_len)
        argv = [
            sys.executable,
            "-m",
            "specexp",
            "model=tiny",
            "drafter=none",
            "load=trace",
            f"load.path={trace}",
            f"load.time_scale={args.time_scale}",
            f"load.phase_s={args.seconds / 3 * args.time_scale}",
            "load.max_concurrency=16",
            f"workload.input_len={args.input_len}",
            f"workload.output_len={args.output_len}",
            "workload.warmup=2",
            "measure.windows=1",
            "measure.warmup_windows=0",
            "tracking.enabled=false",
            f"outputs={Path(args.outputs).resolve()}",
            f"hydra.run.dir={scratch}/run",
            *args.extra,
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=scratch, check=False)
        if proc.returncode != 0:
            sys.exit(f"specexp failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        lines = next(Path(scratch, "run").rglob("records.jsonl")).read_text().splitlines()
    records = [r for r in map(json.loads, lines) if not r["warmup"]]
    late_ms = np.array([(r["send"] - r["arrival"]) * 1e3 for r in records])
    honoured = sum((r["completion_tokens"] or 0) >= r["extra"]["output_asked"] for r in records)
    median = float(np.median(late_ms))
    print(f"trace: {n} requests at {args.rate:g}/s over {args.seconds:g} s, time_scale {args.time_scale:g}")
    print(
        f"send lateness: median {median:.2f} ms, p90 {np.percentile(late_ms, 90):.2f} ms, max {late_ms.max():.2f} ms"
        f" -> median within 5 ms: {'yes' if median <= 5 else 'NO'}"
    )
    print(f"output lengths honoured: {honoured} of {len(records)}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
