"""Item 8: ``resume=<sweep id | latest>`` finishes an interrupted grid sweep: points that finished ok
(matched by their whole configuration) are kept, the rest run again, under the same parent run, and
the summary and verdict cover every point."""

import csv
import json
import signal

import pytest

from tests.support.servers import wait_for

# Two windows each, taken in turns B A | A B: the drafter measures last.
SWEEP = ["drafter=none,tiny", "batch=2", "workload.num_prompts=64", "workload.output_len=32", "measure.windows=2"]


@pytest.mark.slow
def test_resume_reruns_only_what_did_not_finish(ws) -> None:
    proc = ws.popen(*SWEEP, "-m")
    try:
        # The arms take turns (windows B A | A B): the baseline records its point after its last
        # window, while the drafter's last window (64 requests, seconds) is still to come.
        wait_for(lambda: list(ws.outputs.glob("multirun/*/0/results.json")), 300, "the first point's result", proc)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    (sweep,) = ws.sweeps()
    first = json.loads((sweep / "0" / "results.json").read_text())
    assert first["status"] == "ok"
    kept = (sweep / "0" / "results.json").read_bytes()
    (parent,) = [r for r in ws.runs() if r.data.tags.get("specexp.role") == "parent"]

    run = ws.run(*SWEEP, f"resume={first['tags']['specexp.sweep_id']}", "-m", timeout=400)
    assert run.returncode == 0, run.stderr[-3000:]
    assert ws.sweeps() == [sweep]  # the same folder
    assert (sweep / "0" / "results.json").read_bytes() == kept  # the finished point was not rerun
    interrupted = json.loads((sweep / "1" / "results.json").read_text())
    assert interrupted["status"] == "interrupted"  # the earlier attempt is kept, not written over
    rerun = json.loads((sweep / "2" / "results.json").read_text())
    assert rerun["status"] == "ok" and rerun["params"]["drafter.name"] == "tiny"
    assert not (sweep / "3").exists()

    runs = ws.runs()
    parents = [r for r in runs if r.data.tags.get("specexp.role") == "parent"]
    assert [p.info.run_id for p in parents] == [parent.info.run_id]  # one parent run
    assert parents[0].info.status == "FINISHED" and parents[0].data.metrics["points"] == 2
    ok = [r for r in runs if r.data.tags.get("specexp.role") != "parent" and r.info.status == "FINISHED"]
    assert sorted(r.data.params["drafter.name"] for r in ok) == ["none", "tiny"]
    (spec,) = [r for r in ok if r.data.params["drafter.name"] == "tiny"]
    assert "speedup" in spec.data.metrics  # against the baseline measured before the interrupt
    with (sweep / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["drafter.name"], r["status"]) for r in rows) == [("none", "ok"), ("tiny", "ok")]
    verdict = (sweep / "verdict.txt").read_text()
    assert "tiny" in verdict and "batch 2" in verdict, verdict  # the verdict pairs the two attempts' points

    again = ws.run(*SWEEP, "resume=latest", "-m", timeout=300)  # nothing left to do
    assert again.returncode == 0, again.stderr[-3000:]
    assert not (sweep / "3").exists() and ws.sweeps() == [sweep]
    assert len(ws.runs()) == len(runs)


def test_resume_completes_an_upload_an_interrupt_cut_short(ws) -> None:
    """An interrupt can land while a finished point uploads (its results.json is written first): the
    run is left KILLED, not marked uploaded, and resuming the sweep completes it."""
    small = ["drafter=none", "batch=1", "workload.num_prompts=8", "workload.output_len=8"]
    run = ws.run(*small, "-m", timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    (sweep,) = ws.sweeps()
    (point,) = [r for r in ws.runs() if r.data.tags.get("specexp.role") != "parent"]
    mlflow = ws.mlflow()
    mlflow.delete_tag(point.info.run_id, "specexp.uploaded")  # as the interrupt left it
    mlflow.set_terminated(point.info.run_id, "KILLED")

    again = ws.run(f"resume={sweep.name}", *small, "-m", timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    completed = mlflow.get_run(point.info.run_id)
    assert completed.info.status == "FINISHED" and completed.data.tags["specexp.uploaded"] == "true"
    assert not (sweep / "1").exists()  # completed, not measured again
