"""A closed-loop sweep runs both arms at the labelled concurrency: fillers keep ``batch`` requests in
flight to each window's end, so a faster arm does not measure a ramp-down the slower one does not
(before: tiny averaged 7.57 requests in flight at batch 8 against the baseline's 7.99)."""

import json

import pytest

from tests.conftest import FAST


def test_both_arms_measure_at_batch_8_within_2_percent(specexp) -> None:
    run = specexp("drafter=none,tiny", "batch=8", *FAST, "workload.num_prompts=16", "-m")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    points = [json.loads(p.read_text()) for p in sorted((run.workdir / "multirun").glob("*/results.json"))]
    assert sorted(p["params"]["drafter.name"] for p in points) == ["none", "tiny"]
    for p in points:
        assert p["metrics"]["concurrency_mean"] == pytest.approx(8, rel=0.02), p["params"]["drafter.name"]
        assert all(w["concurrency_mean"] == pytest.approx(8, rel=0.02) for w in p["windows"])
