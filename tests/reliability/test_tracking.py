"""Item 5: tracking that cannot be reached stops a run at once; tracking lost mid-sweep loses nothing.

The results stay on disk, the exit code says tracking failed, and ``python -m specexp.sync`` uploads
them once the server is back; a second sync adds nothing.
"""

import json

import pytest

from tests.support.servers import free_port, mlflow_server, wait_for

TRACKING_FAILED = 3  # specexp's exit code when points were measured but not all reached tracking


def test_unreachable_tracking_fails_fast_before_any_server(ws) -> None:
    run = ws.run("drafter=none", "tracking.uri=http://127.0.0.1:9", timeout=120)
    assert run.returncode == 2, run.stderr[-3000:]
    assert "tracking.uri" in run.stderr and "http://127.0.0.1:9" in run.stderr and "Fix:" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (ws.outputs / "servers").exists()


def history(client, run_id: str) -> dict[str, int]:
    run = client.get_run(run_id)
    return {k: len(client.get_metric_history(run_id, k)) for k in run.data.metrics}


@pytest.mark.slow
def test_tracking_lost_mid_sweep_keeps_results_and_sync_uploads_them_once(ws) -> None:
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    # a short first point, tracked; a second one long enough to be measuring when the server goes
    args = ["drafter=none", "batch=2", "workload.num_prompts=4,64", "workload.output_len=32", f"tracking.uri={uri}"]
    with mlflow_server(ws.root, port):
        proc = ws.popen(*args, "-m")

        def first_point_tracked() -> bool:
            path = next(iter(ws.outputs.glob("multirun/*/0/results.json")), None)
            return path is not None and json.loads(path.read_text()).get("run_id") is not None

        wait_for(first_point_tracked, 300, "the first point in MLflow", proc)
    out, _ = proc.communicate(timeout=300)  # the MLflow server is gone for the second point
    assert proc.returncode == TRACKING_FAILED, out[-3000:]
    (sweep,) = ws.sweeps()
    results = [json.loads((sweep / str(i) / "results.json").read_text()) for i in (0, 1)]
    assert [r["status"] for r in results] == ["ok", "ok"]  # measured and kept on disk
    assert results[1]["run_id"] is None
    assert f"python -m specexp.sync {sweep}" in out

    with mlflow_server(ws.root, port):
        sync = ws.module("specexp.sync", str(sweep))
        assert sync.returncode == 0, sync.stderr[-3000:]
        client = ws.mlflow(uri)
        runs = ws.runs(uri)
        parents = [r for r in runs if r.data.tags.get("specexp.role") == "parent"]
        children = [r for r in runs if r.data.tags.get("specexp.role") != "parent"]
        assert len(parents) == 1 and len(children) == 2
        assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
        assert {c.data.params["workload.num_prompts"] for c in children} == {"4", "64"}
        assert parents[0].data.metrics["points"] == 2 and parents[0].info.status == "FINISHED"
        before = {r.info.run_id: history(client, r.info.run_id) for r in runs}
        artifacts = {r.info.run_id: sorted(a.path for a in client.list_artifacts(r.info.run_id)) for r in runs}

        again = ws.module("specexp.sync", str(sweep))
        assert again.returncode == 0, again.stderr[-3000:]
        rerun = ws.runs(uri)
        assert {r.info.run_id for r in rerun} == set(before)
        assert {r.info.run_id: history(client, r.info.run_id) for r in rerun} == before
        assert {r.info.run_id: sorted(a.path for a in client.list_artifacts(r.info.run_id)) for r in rerun} == artifacts
