"""Items 2 and 3: two sweeps started in the same second on a fresh MLflow store.

Each gets its own folder (the sweep id in its path) and its own server log; neither overwrites the
other's results; the store is created once (no race in MLflow's table creation) and each sweep has
its parent run. A run folder that already holds results is never written over.
"""

import csv
import json
import subprocess
import time

import mlflow.store.db.utils
import pytest
from mlflow import MlflowClient

from tests.reliability.conftest import Workspace, workspace
from tests.support.store import logged_runs, place


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory, shared_outputs) -> tuple[Workspace, list[subprocess.CompletedProcess]]:
    ws = workspace(tmp_path_factory.mktemp("two_sweeps"), shared_outputs)  # a fresh store: no template copied
    time.sleep(1.05 - time.time() % 1)  # start both just after a second ticks over
    procs = [ws.popen("drafter=none", "batch=1", "-m") for _ in range(2)]
    done = []
    for proc in procs:
        out, _ = proc.communicate(timeout=400)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, out))
    return ws, done


def test_two_sweeps_in_the_same_second_get_their_own_folders(two_sweeps) -> None:
    ws, runs = two_sweeps
    for run in runs:
        assert run.returncode == 0, run.stdout[-3000:]
    sweeps = ws.sweeps()
    assert len(sweeps) == 2, sweeps
    for folder in sweeps:
        result = json.loads((folder / "0" / "results.json").read_text())
        assert result["status"] == "ok"
        sweep_id = result["tags"]["specexp.sweep_id"]
        assert sweep_id in str(folder)  # the sweep id is in the path
        with (folder / "summary.csv").open() as f:
            assert len(list(csv.DictReader(f))) == 1
        assert (folder / "multirun.yaml").exists()


def test_each_launch_has_its_own_server_log(two_sweeps) -> None:
    ws, _ = two_sweeps
    logs = sorted((ws.outputs / "servers").glob("*.log"))
    assert len(logs) == 2, logs
    for folder in ws.sweeps():
        log = (folder / "0" / "server.log").read_text()
        assert log.count("starting on http://") == 1, log[-2000:]  # one server's output, not two


def test_a_fresh_store_shared_by_two_sweeps_gets_both_parent_runs(two_sweeps) -> None:
    ws, runs = two_sweeps
    for run in runs:
        assert "duplicate column" not in run.stdout and "already exists" not in run.stdout, run.stdout[-3000:]
    logged = ws.runs()
    parents = {r.info.run_id: r for r in logged if r.data.tags.get("specexp.role") == "parent"}
    children = [r for r in logged if r.data.tags.get("specexp.role") != "parent"]
    assert len(parents) == 2 and len(children) == 2
    sweep_ids = {p.data.tags["specexp.sweep_id"] for p in parents.values()}
    assert len(sweep_ids) == 2
    for child in children:
        parent = parents[child.data.tags["mlflow.parentRunId"]]
        assert parent.data.tags["specexp.sweep_id"] == child.data.tags["specexp.sweep_id"]
        assert parent.info.status == "FINISHED"


def test_a_sweep_that_cannot_create_its_parent_run_says_so_and_stops(idle_ws, mlflow_template) -> None:
    ws = idle_ws
    place(mlflow_template, ws.outputs / "mlflow.db")
    client = ws.mlflow()
    client.delete_experiment(client.create_experiment("specexp"))  # runs cannot be created in it
    run = ws.main("drafter=none", "batch=1", "-m")
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stdout + run.stderr
    assert "tracking.experiment" in run.stderr and "deleted" in run.stderr and "Fix:" in run.stderr, run.stderr
    assert not (ws.outputs / "servers").exists()  # said before any server started
    assert ws.logged() == 0


def test_a_run_folder_that_holds_results_is_never_written_over(ws) -> None:
    folder = ws.root / "fixed"
    first = ws.run("drafter=none", f"hydra.run.dir={folder}", timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    before = (folder / "results.json").read_text()
    again = ws.main("drafter=none", f"hydra.run.dir={folder}")  # refused: in this process
    assert again.returncode == 2, again.stderr[-3000:]
    assert "Traceback" not in again.stdout + again.stderr
    assert str(folder) in again.stderr and "hydra.run.dir" in again.stderr
    assert (folder / "results.json").read_text() == before


def test_a_second_sweep_into_the_same_folder_writes_over_nothing(ws) -> None:
    folder = ws.root / "fixed"
    first = ws.run("drafter=none", "batch=1", f"hydra.sweep.dir={folder}", "-m", timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    kept = (folder / "0" / "results.json").read_bytes()
    again = ws.run("drafter=none", "batch=2", f"hydra.sweep.dir={folder}", "-m", timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (folder / "0" / "results.json").read_bytes() == kept  # the first sweep's point is intact
    second = json.loads((folder / "1" / "results.json").read_text())
    assert second["status"] == "ok" and second["params"]["batch"] == 2
    with (folder / "summary.csv").open() as f:
        assert sorted(row["batch"] for row in csv.DictReader(f)) == ["1", "2"]  # the folder's every point


def test_a_copy_of_the_template_store_opens_without_migrating_and_takes_runs(
    tmp_path, mlflow_template, monkeypatch
) -> None:
    """The session's empty store (tests.support.store), copied: MLflow opens it as it is (no table
    creation, no migration), adds its Default experiment where a new store would, and logs into it."""
    migrations = []
    initialize = mlflow.store.db.utils._initialize_tables

    def seen(engine) -> None:
        migrations.append(engine.url)
        initialize(engine)

    monkeypatch.setattr(mlflow.store.db.utils, "_initialize_tables", seen)  # creates and migrates the tables
    monkeypatch.chdir(tmp_path)
    db = place(mlflow_template, tmp_path / "store" / "mlflow.db")
    assert logged_runs(db) == 0 and logged_runs(tmp_path / "absent.db") == 0
    assert not (tmp_path / "absent.db").exists()  # looking created nothing
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    (default,) = client.search_experiments()
    assert default.artifact_location == str(tmp_path / "mlruns" / "0")  # made by this opening, not the template's
    run = client.create_run(client.create_experiment("specexp"))
    client.log_metric(run.info.run_id, "output_throughput", 12.5)
    client.set_terminated(run.info.run_id)
    assert migrations == []
    assert logged_runs(db) == 1
    assert client.get_run(run.info.run_id).data.metrics == {"output_throughput": 12.5}
