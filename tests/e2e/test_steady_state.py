"""A closed-loop sweep runs both arms at the labelled concurrency: fillers keep ``batch`` requests in
flight to each window's end, so a faster arm does not measure a ramp-down the slower one does not
(before: tiny averaged 7.57 requests in flight at batch 8 against the baseline's 7.99).

The same sweep's output goes to a pipe, as to a file: specexp.live shows one plain line per point
there (its terminal view is tests/e2e/test_live.py's)."""

import json

import pytest

from tests.conftest import FAST


def test_both_arms_measure_at_batch_8_within_2_percent_and_a_file_gets_one_line_per_point(specexp) -> None:
    run = specexp("drafter=none,tiny", "batch=8", *FAST, "workload.num_prompts=16", "-m")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    points = [json.loads(p.read_text()) for p in sorted((run.workdir / "multirun").glob("*/results.json"))]
    assert sorted(p["params"]["drafter.name"] for p in points) == ["none", "tiny"]
    for p in points:
        assert p["metrics"]["concurrency_mean"] == pytest.approx(8, rel=0.02), p["params"]["drafter.name"]
        assert all(w["concurrency_mean"] == pytest.approx(8, rel=0.02) for w in p["windows"])

    stderr = run.proc.stderr
    shown = [x for x in stderr.splitlines() if x.startswith("point ")]
    # the arms take turns: either may end first
    assert sorted(x.split(" · ")[0] for x in shown) == ["point 1/2 drafter=none", "point 2/2 drafter=tiny"]
    assert all(" · ok in " in x for x in shown)
    assert "\x1b[" not in stderr and "window 1/3" not in stderr and "verdict so far" not in stderr
