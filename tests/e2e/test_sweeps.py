"""Multiruns on the live reference engine: server reuse by key, failures, interrupts."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from specexp.metrics.registry import TABLE_KEYS
from specexp.report.verdict import METHODS_LEAD
from tests.conftest import FAST, engine_processes, run_outputs, sigint_as_in_a_terminal


def children_and_parent(runs):
    parents = [r for r in runs if r.data.tags.get("specexp.role") == "parent"]
    children = [r for r in runs if r.data.tags.get("specexp.role") != "parent"]
    return parents, children


@pytest.mark.parametrize(
    "order",
    [
        ("drafter=none,tiny", "batch=1,4"),
        ("batch=1,4", "drafter=none,tiny"),
        ("batch=1,4", "drafter=none,tiny", "arms=sequential"),
    ],
)
def test_four_points_two_servers_either_order(specexp, order) -> None:
    """One sweep per order of the axes (the servers' order is the point), each read whole: two
    launches, the points' names and metrics with an interval for every headline number, the
    parent's, the plots and the verdict."""
    run = specexp(*order, "-m")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    parents, children = children_and_parent(run.runs())
    assert len(parents) == 1 and len(children) == 4
    parent_id = parents[0].info.run_id
    parent = parents[0]  # named by what was swept; its params and description say what it found
    assert parent.info.run_name == "torch/tiny: drafter none,tiny × batch 1,4"
    assert parent.data.params["swept.drafter"] == "none,tiny" and parent.data.params["swept.batch"] == "1,4"
    assert parent.data.params["engine.name"] == "torch" and "batch" not in parent.data.params
    note = parent.data.tags["mlflow.note.content"]
    assert "tiny " in note and "| config | batch |" in note
    assert all(c.data.tags["mlflow.parentRunId"] == parent_id for c in children)
    keys = {c.data.tags["specexp.server_key"] for c in children}
    assert len(keys) == 2
    launches = [c for c in children if c.data.tags["specexp.server_reused"] == "false"]
    assert len(launches) == 2 and all("server_startup_s" in c.data.metrics for c in launches)
    for c in children:
        # named by the axes that vary; the run spans the measured window, sampled by MLflow's monitor
        assert c.info.run_name == f"drafter={c.data.params['drafter.name']} batch={c.data.params['batch']}"
        measured_ms = 1000 * c.data.metrics["output_tokens"] / c.data.metrics["output_throughput"]
        assert c.info.end_time - c.info.start_time >= measured_ms - 1
        assert "system/cpu_utilization_percentage" in c.data.metrics
        m = c.data.metrics
        assert m["windows"] >= 3 and m["requests_ok"] == 4 * m["windows"]
        headline = [k for k in TABLE_KEYS if k in m and not (k == "accept_length" and "accept_rate" not in m)]
        missing = [f"{k}_ci95" for k in headline if f"{k}_ci95" not in m]
        assert not missing, missing  # every headline number carries its interval (1.0 for no drafter is exact)
        assert {"client_cpu", "host_load1", "windows_warmup", "windows_settled"} <= set(m)
        if c.data.params["drafter.name"] == "none":
            assert c.data.metrics["accept_length"] == 1.0
            assert "accept_rate" not in c.data.metrics
        else:
            assert c.data.metrics["accept_length"] > 1.0
            assert "speedup" in c.data.metrics and "decode_speedup" in c.data.metrics
            # windows that took turns are paired; one arm after the other, they are not
            method = "unpaired" if "arms=sequential" in order else "paired"
            assert c.data.tags["specexp.speedup_method"] == method
            assert (c.data.metrics["windows_paired"] > 0) == (method == "paired")
            assert "speedup_unpaired" in c.data.metrics and "speedup_lo" in c.data.metrics
            assert "speedup_ci95" in m and "decode_speedup_ci95" in m
    rows = list(csv.DictReader((run.workdir / "multirun" / "summary.csv").open()))
    # Two launches either way: on CPU both servers stay up and the arms take turns at each batch,
    # so a speedup compares measurements seconds apart; arms=sequential runs one server, then the other.
    turns = [(r["drafter.name"], r["batch"]) for r in rows]
    if "arms=sequential" in order:
        assert turns == [("none", "1"), ("none", "4"), ("tiny", "1"), ("tiny", "4")]
    else:
        assert turns == [("none", "1"), ("tiny", "1"), ("none", "4"), ("tiny", "4")]
        assert "arms: 2 servers up at once, taking turns at each load" in run.proc.stdout
    artifacts = {a.path for a in run.mlflow.list_artifacts(parent_id)}
    assert {"summary.csv", "verdict.txt", "plots"} <= artifacts
    plots = run.workdir / "multirun" / "plots"
    for name in ("output_throughput", "speedup", "decode_speed", "accept_length", "ttft", "tpot"):
        assert (plots / f"{name}.png").stat().st_size > 10_000, name
    assert "Speedup of speculation" in (plots / "plots.html").read_text()
    header = (run.workdir / "multirun" / "summary.csv").read_text().splitlines()[0].split(",")
    assert header[header.index("output_throughput") + 1] == "output_throughput_ci95"  # ± beside the value
    verdict = (run.workdir / "multirun" / "verdict.txt").read_text()
    first = verdict.splitlines()[0]
    assert first.startswith("tiny") and first[:40] in run.proc.stderr  # the answer in words, in the console
    assert "95% CI" in verdict or "no measurable difference" in verdict
    said = "\n".join(line for line in verdict.splitlines() if not line.startswith(METHODS_LEAD))  # not how
    assert any(k.startswith("crossover_batch") for k in parent.data.metrics) or "break-even" not in said


def test_failed_server_is_recorded_and_the_sweep_goes_on(specexp, shared_outputs, broken_model) -> None:
    good = shared_outputs / "models" / "tiny" / "target"
    run = specexp("drafter=none", f"model.path={good},{broken_model},{good}/", "engine.startup_timeout_s=60", "-m")
    assert run.proc.returncode == 1, run.proc.stderr[-3000:]
    _, children = children_and_parent(run.runs())
    by_path = {c.data.params["model.path"]: c for c in children}
    bad = by_path[str(broken_model)]
    assert bad.info.status == "FAILED" and bad.data.tags["specexp.status"] == "failed"
    assert "server.log" in {a.path for a in run.mlflow.list_artifacts(bad.info.run_id)}
    results = [json.loads(p.read_text()) for p in sorted((run.workdir / "multirun").glob("*/results.json"))]
    assert [r["status"] for r in results] == ["ok", "failed", "ok"]
    assert "log tail" in results[1]["error"]


@pytest.mark.slow  # a live sweep, interrupted: not for the quick tier, whose fixtures rule cannot see it
def test_sigint_mid_sweep_marks_the_run_and_leaves_no_engine(tmp_path, shared_outputs) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    argv = [
        sys.executable,
        "-m",
        "specexp",
        *FAST,
        "workload.num_prompts=400",
        "workload.output_len=64",
        "drafter=none,tiny",
        f"tracking.uri={uri}",
        f"hydra.sweep.dir={tmp_path}/multirun",
        "-m",
    ]
    env = {**os.environ, "SPECEXP_OUTPUTS": str(run_outputs(tmp_path, shared_outputs))}
    proc = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=sigint_as_in_a_terminal,
    )
    marker = str(tmp_path / "outputs" / "models")
    deadline = time.monotonic() + 180
    server_log = None
    while time.monotonic() < deadline and server_log is None:
        time.sleep(0.5)
        config = next((tmp_path / "multirun").glob("0/server.json"), None) if (tmp_path / "multirun").exists() else None
        server_log = config
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
    assert server_log is not None, "the first point never started measuring"
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out[-3000:]  # 128 + SIGINT, as a shell reports Ctrl-C
    result = json.loads((tmp_path / "multirun" / "0" / "results.json").read_text())
    assert result["status"] == "interrupted"
    from mlflow import MlflowClient

    mlflow = MlflowClient(tracking_uri=uri)
    exp = mlflow.get_experiment_by_name("specexp")
    statuses = {
        r.data.tags.get("specexp.role", "point"): r.info.status for r in mlflow.search_runs([exp.experiment_id])
    }
    assert statuses == {"parent": "KILLED", "point": "KILLED"}
    time.sleep(0.5)
    assert engine_processes(marker) == [], out[-2000:]


def test_repeats_launch_every_server_again_interleaved(specexp) -> None:
    run = specexp("drafter=none,tiny", "batch=2", "repeats=2", "measure.windows=2", "-m")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    rows = list(csv.DictReader((run.workdir / "multirun" / "summary.csv").open()))
    order = [(r["drafter.name"], r["repeat"]) for r in rows]
    assert order == [("none", "0"), ("tiny", "0"), ("none", "1"), ("tiny", "1")]  # A B A B
    _, children = children_and_parent(run.runs())
    assert all(c.data.tags["specexp.server_reused"] == "false" for c in children)  # four launches
    line, how = (run.workdir / "multirun" / "verdict.txt").read_text().splitlines()
    assert line.startswith("tiny")  # two launches: a wide interval (t with 1 degree of freedom), honestly
    assert how.startswith("95% CI [lo, hi]: "), how  # and how that interval was made


def test_an_engine_that_is_not_installed_stops_the_sweep_before_any_job(specexp) -> None:
    run = specexp(
        "engine=sglang", "drafter=ttt5", "workload=random", "batch=1,4", "engine.python=/nonexistent/python", "-m"
    )
    assert run.proc.returncode == 2
    assert run.proc.stderr.count("invalid configuration: engine.python") == 1  # one message, not one per job
    assert "install_sglang_light.sh" in run.proc.stderr
    assert not list((run.workdir / "multirun").glob("*/results.json"))
