"""A dry run says, once and before any server, what its measure settings can detect (the power line of
specexp.metrics.sequential.design_line), single run and sweep alike."""

from __future__ import annotations

import json

from specexp.metrics.sequential import design_line

POINT = ("engine=torch", "model=tiny", "drafter=tiny", "dry_run=true", "measure.windows=6", "measure.max_windows=9")
SETTINGS = "design: measure.windows=6 measure.max_windows=9 measure.rel_ci=null"


def test_a_single_runs_dry_run_says_what_its_windows_detect(specexp_main) -> None:
    run = specexp_main(*POINT)
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    out = run.proc.stdout
    assert out.count(SETTINGS) == 1 and out.count(design_line(6)) == 1
    assert out.index(design_line(6)) < out.index("{")  # the plan's JSON is still the output's last part
    assert json.loads(out[out.index("{") :])["argv"][1:3] == ["-m", "specexp.reference"]


def test_a_sweeps_dry_run_says_it_once_for_all_its_points(specexp_main) -> None:
    run = specexp_main(*POINT, "batch=1,4", "-m")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    out = run.proc.stdout + run.proc.stderr
    assert "dry run: 4 points on 2 server(s)" in out  # and the baseline arm (baseline=auto)
    assert out.count(SETTINGS) == 1 and out.count(design_line(6)) == 1


def test_a_precision_target_says_its_looks_and_what_it_is_judged_on(specexp_main) -> None:
    run = specexp_main(*POINT, "measure.windows=4", "measure.max_windows=9", "measure.rel_ci=0.05")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert (
        "stopping: at the looks 4, 6, 9 windows, once the interval is within ±0.05: arms taking turns with "
        "drafter=none on their speedups, together; any other point on its own output_throughput"
    ) in " ".join(run.proc.stdout.split())
