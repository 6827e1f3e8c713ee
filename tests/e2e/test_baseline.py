"""baseline=auto: a speculative sweep without drafter=none gets its baselines, and says so."""

import re


def planned(output: str) -> list[tuple[str, str]]:
    """The dry run's compact plan as (point, its server's argv), one per planned point."""
    out = []
    for points, argv in re.findall(r"^server \d+ \(\w+\): \d+ point\(s\): (.*)\n  argv: (.*)$", output, re.M):
        out += [(point, argv) for point in points.split(", ")]
    return out


def test_speculative_sweep_gets_a_baseline_per_batch(specexp) -> None:
    run = specexp("drafter=tiny", "batch=1,4", "dry_run=true", "-m")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    jobs = planned(run.proc.stdout + run.proc.stderr)
    assert len(jobs) == 4
    assert sum("--draft-model" not in argv for _, argv in jobs) == 2  # two added drafter=none points
    assert "baseline=auto: no drafter=none point at batch 1, 4; added 2" in run.proc.stderr


def test_nothing_added_when_the_baseline_is_there_or_turned_off(specexp) -> None:
    run = specexp("drafter=none,tiny", "batch=1", "dry_run=true", "-m")
    assert len(planned(run.proc.stdout + run.proc.stderr)) == 2 and "baseline=auto" not in run.proc.stderr
    run = specexp("drafter=tiny", "batch=1,4", "baseline=off", "dry_run=true", "-m")
    assert len(planned(run.proc.stdout + run.proc.stderr)) == 2 and "baseline=auto" not in run.proc.stderr
