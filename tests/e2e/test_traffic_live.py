"""A changing load on the reference engine, end to end: a three-phase profile of a few seconds, two
arms taking turns. Every arm is sent the same arrivals, never before their time (how late is printed,
not asserted: benchmarks/replay_lateness.py prints the figure), and the sweep folder gets phases.csv,
regret.csv, the timeline and the verdict's per-phase lines."""

from __future__ import annotations

import csv
import json
import statistics

PROFILE = ["load=profile", "load.profile=[[0,2],[2,6],[4,2]]", "load.duration_s=6", "load.max_concurrency=8"]


def test_a_profile_replays_the_same_arrivals_per_arm_and_is_judged_per_phase(specexp) -> None:
    run = specexp("drafter=none,tiny", *PROFILE, "measure.windows=1", "measure.warmup_windows=0", "-m")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    sweep = run.workdir / "multirun"
    arrivals, late = {}, []
    for folder in sorted(p.parent for p in sweep.glob("*/records.jsonl")):
        records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
        measured = [r for r in records if not r["warmup"]]
        arrivals[folder.name] = [round(r["extra"]["arrival_s"], 9) for r in measured]
        late += [r["send"] - r["arrival"] for r in measured]
        assert all(r["error"] is None for r in measured), [r["error"] for r in measured]
    assert len(arrivals) == 2 and len({tuple(a) for a in arrivals.values()}) == 1  # the same for both arms
    assert min(late) >= 0  # never sent before its time
    print(f"send lateness: median {1e3 * statistics.median(late):.2f} ms, max {1e3 * max(late):.2f} ms")
    phases = list(csv.DictReader((sweep / "phases.csv").open()))
    arms = list(dict.fromkeys(r["arm"] for r in phases))
    assert arms[0] == "none" and arms[1].startswith("tiny depth") and len(arms) == 2
    assert [(r["phase"], r["requests"], float(r["offered"])) for r in phases] == 2 * [
        ("1", "4", 2.0),  # each step offers exactly its rate
        ("2", "12", 6.0),
        ("3", "4", 2.0),
    ]
    regret = list(csv.DictReader((sweep / "regret.csv").open()))
    assert {(r["arm"], r["phase"]) for r in regret} == {(a, p) for a in arms for p in ("1", "2", "3", "run")}
    verdict = (sweep / "verdict.txt").read_text()
    assert (
        "phase 2 (2-4 s, offered 6.00/s): best " in verdict
        and "regret intervals: paired percentile bootstrap" in verdict
    )
    assert (sweep / "timeline.png").stat().st_size > 0
