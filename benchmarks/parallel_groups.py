"""Wall time of one sweep of two server groups, groups one after another (Hydra's basic launcher)
against groups side by side (``hydra/launcher=submitit_local``), on the reference engine.

Each launcher runs the same sweep (``drafter=none,tiny batch=1,2``: two servers, two points each) in
a fresh folder with its own MLflow store, as ``python -m specexp`` would from a shell; printed: the
wall time of the whole command, and each group's job time from its ``attempts.jsonl``. Side by side
saves the second group's server start and points where the machine has room for both; on a small
machine the two servers compete for the cores (and each group's job imports specexp again), which
the figures show. Not a test: figures only.

    .venv/bin/python benchmarks/parallel_groups.py [--prompts 4] [--output-len 16] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAUNCHERS = {"basic": "hydra/launcher=basic", "submitit_local": "hydra/launcher=submitit_local"}


def sweep(launcher: str, folder: Path, prompts: int, output_len: int) -> tuple[float, list[float]]:
    argv = [
        sys.executable,
        "-m",
        "specexp",
        "drafter=none,tiny",
        "batch=1,2",
        f"workload.num_prompts={prompts}",
        "workload.warmup=1",
        f"workload.output_len={output_len}",
        "workload.input_len=16",
        LAUNCHERS[launcher],
        f"tracking.uri=sqlite:///{folder / 'mlflow.db'}",
        f"hydra.sweep.dir={folder / 'multirun'}",
        "-m",
    ]
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=folder, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{launcher}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    jobs = []
    for log in sorted((folder / "multirun" / "groups").glob("*/attempts.jsonl")):
        events = [json.loads(line) for line in log.read_text().splitlines()]
        jobs.append(events[-1]["time"] - events[0]["time"])
    return wall, jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4, help="measured requests per point")
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1, help="sweeps per launcher, alternating")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPU(s); drafter=none,tiny batch=1,2 ({args.prompts} prompts x {args.output_len} tokens)")
    with tempfile.TemporaryDirectory(prefix="specexp-groups-") as tmp:
        for r in range(args.rounds):
            for launcher in LAUNCHERS:
                folder = Path(tmp) / f"{launcher}-{r}"
                folder.mkdir()
                wall, jobs = sweep(launcher, folder, args.prompts, args.output_len)
                groups = ", ".join(f"{t:.1f}" for t in jobs)
                print(f"{launcher:>15}: {wall:6.1f} s wall, group jobs {groups} s")


if __name__ == "__main__":
    main()
