"""How fast does the command line answer? The wall time of the commands that start no server (help,
version, a refused value) next to a bare ``python -c pass``, and which heavy libraries each imported.

A typo should be answered in about a second, as ``git`` answers one: these commands must never import
the libraries a run needs (MLflow, Optuna, torch, SciPy, aiohttp, matplotlib, plotly). Each command runs
--runs times (median wall time shown); the heavy modules come from one more run under ``-X importtime``.

    .venv/bin/python benchmarks/cli_start.py [--runs 5]

Figures only, not a test (tests/unit/test_fast_start.py checks the imports). State the load beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HEAVY = ("mlflow", "optuna", "torch", "scipy", "aiohttp", "matplotlib", "plotly")

COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "python -m specexp --help": ["-m", "specexp", "--help"],
    "python -m specexp --version": ["-m", "specexp", "--version"],
    "python -m specexp batch=0": ["-m", "specexp", "batch=0"],
    # refused at preflight, before any server or store: an endpoint that does not answer (port 9); it
    # prepares model=tiny first, built under $SPECEXP_OUTPUTS (else ./outputs) unless it is there
    "python -m specexp engine=external (unreachable)": [
        "-m",
        "specexp",
        "engine=external",
        "engine.url=http://127.0.0.1:9",
        "engine.model_name=x",
    ],
}


def heavy_imports(importtime_log: str) -> list[str]:
    """The heavy top-level packages named in an ``-X importtime`` log, in the order first imported."""
    seen: list[str] = []
    for line in importtime_log.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        top = line.rsplit("|", 1)[1].strip().split(".")[0]
        if top in HEAVY and top not in seen:
            seen.append(top)
    return seen


def wall_time(args: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, *args], capture_output=True, check=False)
    return time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per command (the median is shown)")
    runs = parser.parse_args().runs
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores, {runs} runs each")
    for name, args in COMMANDS.items():
        median = statistics.median(wall_time(args) for _ in range(runs))
        log = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True).stderr
        print(f"{name:48} {median:6.2f}s  heavy imports: {', '.join(heavy_imports(log)) or 'none'}", flush=True)


if __name__ == "__main__":
    main()
