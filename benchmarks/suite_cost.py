"""Where does the test suite spend its time? The cost of each test file (setup, call and teardown of all
its tests, from pytest's JUnit XML), largest first, with its share of the whole and the slowest tests.

    .venv/bin/python benchmarks/suite_cost.py                    # runs the full suite, CI=true as CI does
    .venv/bin/python benchmarks/suite_cost.py -- -m quick        # any pytest arguments after --
    .venv/bin/python benchmarks/suite_cost.py --junit run.xml    # reads an earlier run's JUnit XML

Not a test: figures only (a markdown table, for the issue notes and the README's timings).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_costs(junit: Path) -> list[tuple[str, str, float]]:
    """(file, test name, seconds) for every test case in a JUnit XML report."""
    cases = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").split("::")[0]
        parts = module.split(".")
        # pytest's classname is the dotted module path, then the class for tests in a class.
        while parts and not (REPO / Path(*parts)).with_suffix(".py").exists():
            parts.pop()
        path = "/".join(parts) + ".py" if parts else module
        cases.append((path, case.get("name", ""), float(case.get("time", 0.0))))
    return cases


def table(cases: list[tuple[str, str, float]], slowest: int) -> str:
    """The per-file table and the slowest tests, as markdown."""
    per_file: dict[str, list[float]] = defaultdict(list)
    for path, _, seconds in cases:
        per_file[path].append(seconds)
    total = sum(seconds for *_, seconds in cases) or 1.0
    lines = ["| file | tests | s | share | cumulative |", "|---|---:|---:|---:|---:|"]
    running = 0.0
    for path, times in sorted(per_file.items(), key=lambda kv: -sum(kv[1])):
        running += sum(times)
        lines.append(f"| {path} | {len(times)} | {sum(times):.1f} | {sum(times) / total:.1%} | {running / total:.1%} |")
    lines += ["", f"{len(cases)} tests, {total:.0f} s in tests ({total / 60:.1f} min)", ""]
    lines += ["| slowest test | s |", "|---|---:|"]
    for path, name, seconds in sorted(cases, key=lambda c: -c[2])[:slowest]:
        lines.append(f"| {path}::{name} | {seconds:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--junit", type=Path, help="read this JUnit XML instead of running the suite")
    parser.add_argument("--slowest", type=int, default=15, help="how many of the slowest tests to list")
    parser.add_argument("pytest_args", nargs="*", help="arguments for pytest (after --)")
    args = parser.parse_args()
    junit = args.junit
    if junit is None:
        junit = Path(tempfile.mkdtemp(prefix="suite-cost-")) / "junit.xml"
        argv = [sys.executable, "-m", "pytest", f"--junitxml={junit}", *args.pytest_args]
        start = time.monotonic()
        proc = subprocess.run(argv, cwd=REPO, env={**os.environ, "CI": os.environ.get("CI", "true")})
        print(f"\npytest exited {proc.returncode} after {time.monotonic() - start:.0f} s wall ({junit})\n")
    print(table(test_costs(junit), args.slowest))


if __name__ == "__main__":
    main()
