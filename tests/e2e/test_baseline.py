"""baseline=auto: a speculative sweep without drafter=none gets its baselines, and says so."""

import json


def planned(stdout: str) -> list[dict]:
    """The dry run's printed jobs (one JSON object each)."""
    decoder, out, i = json.JSONDecoder(), [], stdout.find("{")
    while i != -1:
        obj, end = decoder.raw_decode(stdout, i)
        out.append(obj)
        i = stdout.find("{", end)
    return out


def test_speculative_sweep_gets_a_baseline_per_batch(specexp) -> None:
    run = specexp("drafter=tiny", "batch=1,4", "dry_run=true", "-m")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    jobs = planned(run.proc.stdout)
    assert len(jobs) == 4
    assert sum("--draft-model" not in j["argv"] for j in jobs) == 2  # two added drafter=none points
    assert "baseline=auto: no drafter=none point at batch 1, 4; added 2" in run.proc.stderr


def test_nothing_added_when_the_baseline_is_there_or_turned_off(specexp) -> None:
    run = specexp("drafter=none,tiny", "batch=1", "dry_run=true", "-m")
    assert len(planned(run.proc.stdout)) == 2 and "baseline=auto" not in run.proc.stderr
    run = specexp("drafter=tiny", "batch=1,4", "baseline=off", "dry_run=true", "-m")
    assert len(planned(run.proc.stdout)) == 2 and "baseline=auto" not in run.proc.stderr
