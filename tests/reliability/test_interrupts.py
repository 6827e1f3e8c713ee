"""Item 7 and the signals that must keep working: the parent run and summary follow every point, a
sweep killed outright is marked KILLED at the next start, and no engine outlives specexp."""

import csv
import json
import signal
import time

import pytest

from tests.support.servers import wait_for

SLOW_POINT = ["workload.num_prompts=200", "workload.output_len=32"]
# A sweep's points differ in their number of prompts: the short ones finish in seconds, the slow
# last one is still measuring when the signal lands (and, killed, costs only its start).
SHORT_THEN_SLOW = ["workload.num_prompts=4,200", "workload.output_len=32"]
TWO_SHORT_THEN_SLOW = ["workload.num_prompts=4,8,200", "workload.output_len=32"]


def summary_statuses(folder) -> list[str]:
    with (folder / "summary.csv").open() as f:
        return [row["status"] for row in csv.DictReader(f)]


def parent_of(ws):
    (parent,) = [r for r in ws.runs() if r.data.tags.get("specexp.role") == "parent"]
    return parent


def test_sigkill_leaves_an_up_to_date_parent_which_the_next_start_marks_killed(ws) -> None:
    proc = ws.popen("drafter=none", "batch=1", *TWO_SHORT_THEN_SLOW, "-m")
    try:
        wait_for(lambda: list(ws.outputs.glob("multirun/*/1/results.json")), 300, "two finished points", proc)
        wait_for(lambda: list(ws.outputs.glob("multirun/*/2/server.json")), 60, "the third point", proc)
        time.sleep(1)  # killed while the third (slow) point measures
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    ws.no_engine_left()  # the engine follows specexp (parent-death signal)
    (sweep,) = ws.sweeps()
    assert summary_statuses(sweep) == ["ok", "ok"]
    parent = parent_of(ws)
    assert parent.info.status == "RUNNING" and parent.data.metrics["points"] == 2

    later = ws.run("drafter=none", timeout=300)  # any later start on this store
    assert later.returncode == 0, later.stderr[-3000:]
    parent = parent_of(ws)
    assert parent.info.status == "KILLED"
    said = later.stdout + later.stderr
    assert "KILLED" in said and parent.info.run_id in said


def test_sigint_counts_the_points_that_finished(ws) -> None:
    proc = ws.popen("drafter=none", "batch=1", *SHORT_THEN_SLOW, "-m")
    try:
        wait_for(lambda: list(ws.outputs.glob("multirun/*/0/results.json")), 300, "the first point", proc)
        wait_for(lambda: list(ws.outputs.glob("multirun/*/1/server.json")), 60, "the second point", proc)
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    ws.no_engine_left()
    (sweep,) = ws.sweeps()
    assert summary_statuses(sweep) == ["ok", "interrupted"], out[-3000:]
    parent = parent_of(ws)
    assert parent.info.status == "KILLED"
    assert parent.data.metrics["points"] == 2 and parent.data.metrics["points_failed"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
@pytest.mark.parametrize("phase", ["startup", "measuring"])
def test_a_signal_leaves_no_engine(ws, sig, phase) -> None:
    proc = ws.popen("drafter=tiny", *SLOW_POINT)
    try:
        if phase == "startup":
            wait_for(ws.engines, 120, "the engine to start", proc)
            assert not list(ws.outputs.glob("runs/*/server.json")), "the engine was ready already"
        else:
            wait_for(lambda: list(ws.outputs.glob("runs/*/server.json")), 200, "the measured window", proc)
            time.sleep(1)
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    ws.no_engine_left(timeout=5)
    (results,) = [json.loads(p.read_text()) for p in ws.outputs.glob("runs/*/results.json")]
    assert results["status"] == "interrupted"


def test_batch_128_on_the_tiny_model_completes_with_every_request_ok(ws) -> None:
    run = ws.run("drafter=tiny", "batch=128", "workload.num_prompts=128", timeout=400)
    assert run.returncode == 0, run.stderr[-3000:]
    (folder,) = ws.outputs.glob("runs/*")
    results = json.loads((folder / "results.json").read_text())
    assert results["metrics"]["requests_ok"] >= 128 and results["metrics"]["requests_failed"] == 0
    records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
    measured = [r for r in records if not r["filler"]]  # fillers still running at a window's end are cut
    assert len(measured) >= 128 and all(r["error"] is None for r in measured)  # every window's requests
