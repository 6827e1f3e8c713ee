"""specexp.tracking on a real sqlite store: the experiment's kind, the point run's window, system metrics."""

import logging
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from specexp import tracking
from specexp.config import TrackingConfig


def store(tmp_path: Path, **kw) -> TrackingConfig:
    return TrackingConfig(uri=f"sqlite:///{tmp_path / 'mlflow.db'}", **kw)


def test_experiment_opens_on_runs_new_or_existing(tmp_path) -> None:
    cfg = store(tmp_path)
    mlflow = MlflowClient(cfg.uri)
    old = mlflow.create_experiment("older")  # as specexp made it before, without the kind
    made = tracking.experiment_id(tracking.client(cfg), cfg, tmp_path)
    assert mlflow.get_experiment(made).tags["mlflow.experimentKind"] == "custom_model_development"
    older = TrackingConfig(uri=cfg.uri, experiment="older")
    assert tracking.experiment_id(tracking.client(older), older, tmp_path) == old
    assert mlflow.get_experiment(old).tags["mlflow.experimentKind"] == "custom_model_development"


def test_point_run_spans_its_window_with_system_metrics(tmp_path) -> None:
    cfg = store(tmp_path, system_metrics_interval_s=0.2)
    start = tracking.now_ms()
    run_id = tracking.open_point(cfg, tmp_path, "drafter=tiny batch=16", None, start)
    with tracking.system_metrics(cfg, run_id):
        time.sleep(0.7)
    end = tracking.now_ms()
    time.sleep(0.3)  # logged later: the run must still end when the window did
    tracking.log_point(cfg, tmp_path, "ignored", {"x": 1.0}, {}, {}, [], "FINISHED", None, run_id=run_id, end_time=end)
    run = MlflowClient(cfg.uri).get_run(run_id)
    assert run.info.run_name == "drafter=tiny batch=16"
    assert (run.info.start_time, run.info.end_time) == (start, end)
    cpu = MlflowClient(cfg.uri).get_metric_history(run_id, "system/cpu_utilization_percentage")
    assert len(cpu) >= 2 and all(0 <= m.value <= 100 for m in cpu)  # the monitor's samples and the closing one
    assert run.data.metrics["system/system_memory_usage_megabytes"] > 0


def test_a_window_shorter_than_the_interval_still_gets_a_sample(tmp_path) -> None:
    cfg = store(tmp_path, system_metrics_interval_s=30)
    run_id = tracking.open_point(cfg, tmp_path, "p", None)
    with tracking.system_metrics(cfg, run_id):
        pass
    assert "system/cpu_utilization_percentage" in MlflowClient(cfg.uri).get_run(run_id).data.metrics


def test_no_system_metrics_when_turned_off(tmp_path) -> None:
    cfg = store(tmp_path, system_metrics_interval_s=0)
    run_id = tracking.open_point(cfg, tmp_path, "p", None)
    with tracking.system_metrics(cfg, run_id):
        pass
    assert not MlflowClient(cfg.uri).get_run(run_id).data.metrics


def test_new_store_says_nothing_about_its_tables(tmp_path, caplog) -> None:
    cfg = store(tmp_path)
    with caplog.at_level(logging.INFO):
        tracking.experiment_id(tracking.client(cfg), cfg, tmp_path)
    assert not [r for r in caplog.records if r.levelno < logging.WARNING and r.name.startswith(("mlflow", "alembic"))]


def test_an_upload_cut_short_is_not_finished_and_the_next_one_completes_it(tmp_path) -> None:
    cfg = store(tmp_path)
    tags = {tracking.POINT_ID: "p1"}

    def cut_short():
        raise KeyboardInterrupt  # Ctrl-C half way through the upload
        yield

    with pytest.raises(KeyboardInterrupt):
        tracking.log_point(cfg, tmp_path, "p", {"x": 1.0}, {}, tags, cut_short(), "FINISHED", None)
    mlflow = MlflowClient(cfg.uri)
    (run,) = mlflow.search_runs([tracking.experiment_id(mlflow, cfg, tmp_path)])
    assert run.info.status == "KILLED" and tracking.UPLOADED not in run.data.tags  # never FINISHED half done

    again = tracking.log_point(cfg, tmp_path, "p", {"x": 1.0}, {"drafter.name": "tiny"}, tags, [], "FINISHED", None)
    run = mlflow.get_run(again)
    assert again == run.info.run_id and run.info.status == "FINISHED"
    assert run.data.tags[tracking.UPLOADED] == "true" and run.data.params["drafter.name"] == "tiny"


def test_a_sweeps_view_selects_its_points_with_their_metrics_as_columns(tmp_path) -> None:
    import json

    cfg = store(tmp_path)
    mlflow = tracking.client(cfg)
    parent = tracking.start_parent(cfg, tmp_path, "s1", "torch/tiny: batch 1,4", {})
    tags = {"specexp.sweep_id": "s1"}  # as point.py tags each point
    points = [tracking.log_point(cfg, tmp_path, f"b{b}", {}, {}, tags, [], "FINISHED", "s1") for b in (1, 4)]
    tracking.log_point(cfg, tmp_path, "other", {}, {}, {"specexp.sweep_id": "s2"}, [], "FINISHED", "s2")
    exp_id = mlflow.get_run(parent).info.experiment_id
    view = tracking.save_points_view(
        mlflow, exp_id, "s1", "points of s1", ["batch"], ["output_throughput", "speedup"], ["optuna.trial"]
    )
    envelope = json.loads(mlflow.get_experiment(exp_id).tags[f"mlflow.sharedViewState.{view}"])
    assert envelope["name"] == "points of s1" and isinstance(envelope["createdAt"], int)
    state = json.loads(envelope["state"])  # what MLflow's UI applies: filter, sort, columns
    assert state["selectedColumns"] == [
        "tags.`optuna.trial`",
        "params.`batch`",
        "metrics.`output_throughput`",
        "metrics.`speedup`",
    ]
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`output_throughput`", False)
    # its filter, as the UI sends it to the store: this sweep's points, never its parent (under
    # which the runs table would fold them) nor another sweep's
    found = mlflow.search_runs([exp_id], filter_string=state["searchFilter"])
    assert sorted(r.info.run_id for r in found) == sorted(points)
    assert tracking.ui_path(exp_id, view=view) == (
        f"#/experiments/{exp_id}/runs?viewStateShareKey={view}&workflowType=machine_learning"
    )
    remote = TrackingConfig(uri="http://mlflow.lab:8080/")
    assert tracking.ui_url(remote, exp_id, view=view).startswith("http://mlflow.lab:8080/#/experiments/")


def test_the_hardware_names_the_cpu_and_the_gpus_this_process_may_use(tmp_path, monkeypatch) -> None:
    smi = tmp_path / "nvidia-smi"  # what nvidia-smi lists: every GPU of the node, whatever is visible
    smi.write_text(
        "#!/bin/sh\necho '0, GPU-aaa, NVIDIA H200'\necho '1, GPU-bbb, NVIDIA H200'\necho '2, GPU-ccc, NVIDIA L4'\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    tracking._hardware.cache_clear()  # asked once per process: not with this PATH
    seen = {}
    for visible in (None, "1,GPU-ccc", ""):
        if visible is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        seen[visible] = tracking.hardware().split("; ")[1]
    assert seen == {None: "2x NVIDIA H200, 1x NVIDIA L4", "1,GPU-ccc": "1x NVIDIA H200, 1x NVIDIA L4", "": "no GPU"}
    assert tracking.hardware().split("; ")[0].endswith(" cores)")
    tracking._hardware.cache_clear()
