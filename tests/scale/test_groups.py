"""Server groups under ``hydra/launcher=submitit_local``: one job per group, each in its own process,
side by side, with disjoint GPU slices; one parent run on a real ``mlflow server`` holds every child,
and the summary, plots and verdict are those of the basic launcher."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from specexp.sweep.groups import Group
from tests.conftest import engine_processes, sigint_as_in_a_terminal
from tests.scale.conftest import specexp_argv, specexp_env

pytestmark = pytest.mark.scale


def told(out: str, sweep) -> str:
    """What a failed sweep said, and what its points and group jobs wrote (their logs live elsewhere)."""
    errors = [
        f"{p.parent.name}: {json.loads(p.read_text()).get('error')}" for p in sorted(sweep.glob("*/results.json"))
    ]
    logs = [p.read_text()[-1500:] for p in sorted(sweep.glob(".submitit/*/*_log.err"))]
    return "\n".join([out[-3000:], *errors, *logs])


def attempts(sweep, group: int) -> list[dict]:
    return [json.loads(line) for line in (sweep / "groups" / str(group) / "attempts.jsonl").read_text().splitlines()]


def test_two_groups_run_side_by_side_under_one_parent(tmp_path, outputs, mlflow_server) -> None:
    sweep = tmp_path / "multirun"
    argv = specexp_argv(
        "drafter=none,tiny",
        "batch=1,2",
        "hydra/launcher=submitit_local",
        "engine.gpus=1",
        f"tracking.uri={mlflow_server}",
        f"hydra.sweep.dir={sweep}",
        "-m",
    )
    # This node has two GPUs, each group takes one: the reference engine runs on CPU and ignores
    # CUDA_VISIBLE_DEVICES; what is checked is the slice each group's server was given.
    env = specexp_env(outputs, CUDA_VISIBLE_DEVICES="0,1")
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, told(out, sweep)

    jobs = [attempts(sweep, g) for g in (0, 1)]
    assert [[e["event"] for e in job] for job in jobs] == [["start", "end"]] * 2
    assert all(job[-1]["status"] == "done" for job in jobs)
    pids = {job[0]["pid"] for job in jobs}
    assert len(pids) == 2 and proc.pid not in pids  # a process of its own each, not the sweeper's
    (start0, end0), (start1, end1) = [(job[0]["time"], job[-1]["time"]) for job in jobs]
    assert max(start0, start1) < min(end0, end1), "the two groups did not run at the same time"
    assert [job[0]["devices"] for job in jobs] == [["0"], ["1"]]

    mlflow = MlflowClient(tracking_uri=mlflow_server)
    runs = mlflow.search_runs([mlflow.get_experiment_by_name("specexp").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("specexp.role") == "parent"]
    children = [r for r in runs if r.data.tags.get("specexp.role") != "parent"]
    assert len(children) == 4
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert parent.info.status == "FINISHED" and parent.data.metrics["points"] == 4
    devices = {(c.data.params["drafter.name"], c.data.tags["specexp.cuda_visible_devices"]) for c in children}
    assert devices == {("none", "0"), ("tiny", "1")}
    assert all("speedup" in c.data.metrics for c in children if c.data.params["drafter.name"] == "tiny")
    assert {"summary.csv", "verdict.txt", "multirun.yaml", "plots"} <= {
        a.path for a in mlflow.list_artifacts(parent.info.run_id)
    }
    assert "results.json" in {a.path for a in mlflow.list_artifacts(children[0].info.run_id)}

    ports = set()
    for num in range(4):
        argv = json.loads((sweep / str(num) / "server.json").read_text())["argv"]
        ports.add(argv[argv.index("--port") + 1])
    assert len(ports) == 2  # one server per group, each on its own free port

    with (sweep / "summary.csv").open() as f:
        rows = [(r["drafter.name"], r["batch"], r["status"]) for r in csv.DictReader(f)]
    assert rows == [("none", "1", "ok"), ("none", "2", "ok"), ("tiny", "1", "ok"), ("tiny", "2", "ok")]  # plan order
    verdict = (sweep / "verdict.txt").read_text()
    assert verdict.startswith("tiny") and "batch" in verdict and verdict[:40] in out  # the answer, in the console
    assert (sweep / "plots" / "speedup.png").stat().st_size > 10_000


# Points long enough to be caught mid-window, swept after short ones (the points differ in their
# number of prompts): only the point a signal must catch measuring is long.
SHORT_THEN_LONG = ["workload.num_prompts=4,48", "workload.output_len=32"]
LONG_THEN_SHORT = ["workload.num_prompts=48,4", "workload.output_len=32"]


def start_sweep(tmp_path, outputs, *args: str) -> subprocess.Popen:
    """The sweep in a session of its own, as from a terminal: Ctrl-C reaches its whole process group."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    argv = specexp_argv("hydra/launcher=submitit_local", f"hydra.sweep.dir={tmp_path / 'multirun'}", *args)
    return subprocess.Popen(
        [*argv, f"tracking.uri={uri}", "-m"],
        cwd=tmp_path,
        env=specexp_env(outputs),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=sigint_as_in_a_terminal,
    )


def wait_for(path, proc: subprocess.Popen, timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.monotonic() < deadline, f"no {path}"
        time.sleep(0.2)


def finish(proc: subprocess.Popen) -> str:
    try:
        return proc.communicate(timeout=600)[0]
    finally:
        if proc.poll() is None:
            proc.kill()


def results(sweep, num) -> dict:
    return json.loads((sweep / str(num) / "results.json").read_text())


def summary(sweep) -> list[dict]:
    with (sweep / "summary.csv").open() as f:
        return list(csv.DictReader(f))


def points(sweep) -> list[tuple[str, int | None, str]]:
    """summary.csv's rows in plan order as (drafter, the number of prompts of the point, status); the
    points differ in their number of prompts, read from the point's results (None where it never ran)."""
    rows = []
    for r in summary(sweep):
        ran = r["job_dir"] and (Path(r["job_dir"]) / "results.json").exists()
        prompts = json.loads((Path(r["job_dir"]) / "results.json").read_text())["params"] if ran else {}
        rows.append((r["drafter.name"], prompts.get("workload.num_prompts"), r["status"]))
    return rows


def test_a_preempted_group_is_requeued_and_keeps_what_it_measured(tmp_path, outputs) -> None:
    sweep = tmp_path / "multirun"
    proc = start_sweep(tmp_path, outputs, "drafter=none", "batch=2", *SHORT_THEN_LONG)
    wait_for(sweep / "1" / "server.json", proc)  # the group's second (long) point is being measured
    first = (sweep / "0" / "results.json").read_bytes()
    (start,) = attempts(sweep, 0)
    os.kill(start["pid"], signal.SIGUSR2)  # what SLURM sends a job before pre-empting it (submitit's signal)
    out = finish(proc)
    assert proc.returncode == 0, told(out, sweep)

    events = [(e["event"], e.get("status")) for e in attempts(sweep, 0)]
    assert events == [("start", None), ("end", "SystemExit: 144"), ("start", None), ("end", "done")]
    assert (sweep / "0" / "results.json").read_bytes() == first  # kept, not measured again
    assert json.loads((sweep / "1.attempt1" / "results.json").read_text())["status"] == "interrupted"
    assert results(sweep, 1)["status"] == "ok"
    assert points(sweep) == [("none", 4, "ok"), ("none", 48, "ok")]
    assert [Path(r["job_dir"]).name for r in summary(sweep)] == ["0", "1"]  # the second attempt's folder
    mlflow = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = mlflow.search_runs([mlflow.get_experiment_by_name("specexp").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("specexp.role") == "parent"]
    assert parent.info.status == "FINISHED" and parent.data.metrics["points"] == 2
    statuses = sorted(r.info.status for r in runs if r.data.tags.get("specexp.role") != "parent")
    assert statuses == ["FINISHED", "FINISHED", "KILLED"]  # the interrupted attempt is kept too


@pytest.mark.parametrize(
    ("sig", "events"),
    [
        (signal.SIGKILL, ["start"]),  # a node failure, the out-of-memory killer: a start without an end
        (signal.SIGTERM, ["start", "end"]),  # scancel: the job ends the point it measures and stops
    ],
)
def test_a_killed_group_is_recorded_the_other_goes_on_and_a_resume_finishes_it(tmp_path, outputs, sig, events) -> None:
    sweep = tmp_path / "multirun"
    proc = start_sweep(tmp_path, outputs, "drafter=none,tiny", "batch=2", *LONG_THEN_SHORT)
    wait_for(sweep / "2" / "server.json", proc)  # group 1 measures its first (long) point
    time.sleep(1)
    (start,) = attempts(sweep, 1)
    os.kill(start["pid"], sig)
    out = finish(proc)
    assert proc.returncode == 1, told(out, sweep)
    assert "2 point(s) interrupted (their job ended before they did); resume with: python -m specexp" in out

    assert [e["event"] for e in attempts(sweep, 1)] == events
    caught = 48 if sig == signal.SIGTERM else None  # a SIGKILLed job's point leaves no results of its own
    assert points(sweep) == [
        ("none", 48, "ok"),
        ("none", 4, "ok"),
        ("tiny", caught, "interrupted"),
        ("tiny", None, "interrupted"),
    ]
    rows = summary(sweep)
    assert "the job of server group 1 ended before this point did" in rows[3]["error"]
    if sig == signal.SIGTERM:  # the point itself says so, with what it had received
        assert results(sweep, 2)["error"] == "interrupted (exit 143)"
        assert (sweep / "2" / "server.log").exists() and (sweep / "2" / "records.jsonl").exists()
    time.sleep(1)
    assert engine_processes(str(outputs / "models")) == []  # the killed job's server went with it
    if sig == signal.SIGTERM:
        return

    # The same command again resumes the sweep: only the killed group's points, as a new group.
    kept = (sweep / "0" / "results.json").read_bytes()
    again = start_sweep(tmp_path, outputs, "drafter=none,tiny", "batch=2", *LONG_THEN_SHORT)
    out = finish(again)
    assert again.returncode == 0, told(out, sweep)
    assert (sweep / "0" / "results.json").read_bytes() == kept
    resumed = [
        sorted(o for o in p.overrides if o.startswith(("drafter=", "workload.num_prompts=")))
        for p in Group.load(sweep / "groups" / "2").points
    ]
    assert resumed == [["drafter=tiny", "workload.num_prompts=48"], ["drafter=tiny", "workload.num_prompts=4"]]
    assert not (sweep / "groups" / "3").exists()
    assert sorted(points(sweep)) == [("none", 4, "ok"), ("none", 48, "ok"), ("tiny", 4, "ok"), ("tiny", 48, "ok")]
    mlflow = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = mlflow.search_runs([mlflow.get_experiment_by_name("specexp").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("specexp.role") == "parent"]
    assert parent.info.status == "FINISHED" and parent.data.metrics["points"] == 4


def test_ctrl_c_stops_the_local_group_jobs_with_the_sweep(tmp_path, outputs) -> None:
    sweep = tmp_path / "multirun"
    proc = start_sweep(
        tmp_path, outputs, "drafter=none,tiny", "batch=1", "workload.num_prompts=400", "workload.output_len=32"
    )
    for num in (0, 1):
        wait_for(sweep / str(num) / "server.json", proc)  # both groups measure
    time.sleep(1)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    out = finish(proc)
    assert proc.returncode != 0

    # Every point is in the summary, as interrupted (submitit's local controller kills its jobs a
    # second after passing Ctrl-C on, which may be too soon for a point to write its own results).
    with (sweep / "summary.csv").open() as f:
        rows = [(r["drafter.name"], r["status"]) for r in csv.DictReader(f)]
    assert rows == [("none", "interrupted"), ("tiny", "interrupted")], out[-3000:]
    mlflow = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = mlflow.search_runs([mlflow.get_experiment_by_name("specexp").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("specexp.role") == "parent"]
    assert parent.info.status == "KILLED" and "FINISHED" not in {r.info.status for r in runs}
    time.sleep(1)
    assert engine_processes(str(outputs / "models")) == []


# A job start that fails in submitit's local controller, as in the issue: run as the launcher's own
# setup step (hydra.launcher.setup, in the shell that becomes the job, $$ its id), it counts the
# starts and, for the first ``fail`` of them, removes the job's folder once submitit has made it;
# the controller then cannot open <id>/<id>_0_log.out there (FileNotFoundError) and the job ends
# before the group's job begins.
FAIL_START = """n=$(cat "$1" 2>/dev/null || echo 0)
echo $((n + 1)) > "$1"
if [ "$n" -lt "$2" ]; then sleep 1; rm -rf "$3/$4"; fi
"""


def sweep_failing_starts(tmp_path, outputs, fail: int) -> tuple[subprocess.Popen, str]:
    script, count = tmp_path / "fail_start.sh", tmp_path / "starts"
    script.write_text(FAIL_START)
    setup = f"sh {script} {count} {fail} {tmp_path / 'multirun' / '.submitit'} $$"
    proc = start_sweep(tmp_path, outputs, "drafter=none", "batch=1,2", f"+hydra.launcher.setup=['{setup}']")
    return proc, finish(proc)


def test_a_group_job_that_fails_to_start_is_started_again_and_measures_its_points(tmp_path, outputs) -> None:
    proc, out = sweep_failing_starts(tmp_path, outputs, fail=1)
    sweep = tmp_path / "multirun"
    assert proc.returncode == 0, told(out, sweep)
    assert "_0_log.out" in out and "FileNotFoundError" in out  # the first start failed as in the issue
    assert "server group 0: its job failed to start" in out and "starting it again" in out
    assert (tmp_path / "starts").read_text().strip() == "2"  # started twice
    assert [(e["event"], e.get("status")) for e in attempts(sweep, 0)] == [("start", None), ("end", "done")]
    assert [(r["batch"], r["status"]) for r in summary(sweep)] == [("1", "ok"), ("2", "ok")]
    assert results(sweep, 0)["status"] == results(sweep, 1)["status"] == "ok"


def test_a_group_job_that_fails_to_start_twice_records_its_points_interrupted(tmp_path, outputs) -> None:
    proc, out = sweep_failing_starts(tmp_path, outputs, fail=2)
    sweep = tmp_path / "multirun"
    assert proc.returncode == 1, told(out, sweep)
    assert (tmp_path / "starts").read_text().strip() == "2"  # once, and once again: no third start
    assert not (sweep / "groups" / "0" / "attempts.jsonl").exists()  # the group's job never began
    rows = summary(sweep)
    assert [(r["batch"], r["status"]) for r in rows] == [("1", "interrupted"), ("2", "interrupted")]
    assert all("the job of server group 0 ended before this point did" in r["error"] for r in rows)
    assert engine_processes(str(outputs / "models")) == []
