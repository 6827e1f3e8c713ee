"""MLflow: a parent run per multirun, a child run per point, metrics, params, tags and artifacts.

A point's run is opened when its measured window starts (so MLflow's system-metrics monitor can
sample that window into it) and filled in after the point's results are on disk, so a tracking
failure loses nothing. The MlflowClient API is used directly (no global active run), so a sweeper
and its jobs can share one process without stepping on each other.
"""

from __future__ import annotations

import functools
import logging
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag

from specexp.config import TrackingConfig

log = logging.getLogger("specexp")

PARENT_ROLE = "parent"
_BATCH = 100  # MLflow's limit on params (and a safe size for metrics) per log_batch call
# MLflow 3's UI opens an experiment by its kind: without this tag it guesses GenAI and shows traces.
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
# Chatter a user cannot act on: table creation on a new store, the monitor's start/stop lines.
_QUIET = ("mlflow.store.db.utils", "alembic", "mlflow.system_metrics")


@functools.cache
def git_sha() -> str:
    """The checkout's commit, asked once per process (provenance tag of every run)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def client(cfg: TrackingConfig) -> MlflowClient:
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    return MlflowClient(tracking_uri=cfg.uri)


def ui_path(exp_id: str, run_id: str | None = None) -> str:
    """The MLflow UI's page of an experiment (or a run) on its runs: MLflow 3's UI otherwise starts
    on its GenAI pages whatever the experiment's kind, until a user picks "Model training"."""
    return f"#/experiments/{exp_id}" + (f"/runs/{run_id}" if run_id else "") + "?workflowType=machine_learning"


def ui_hint(cfg: TrackingConfig, exp_id: str, run_id: str | None = None) -> str:
    """Where to look: the page on the tracking server, or how to serve a local store and the page."""
    if cfg.uri.startswith(("http://", "https://")):
        return f"{cfg.uri.rstrip('/')}/{ui_path(exp_id, run_id)}"
    return f"mlflow ui --backend-store-uri {cfg.uri}, then http://127.0.0.1:5000/{ui_path(exp_id, run_id)}"


def now_ms() -> int:
    return int(time.time() * 1000)


def experiment_id(mlflow: MlflowClient, cfg: TrackingConfig, outputs: Path) -> str:
    """The experiment's id, created on first use, and marked as runs (not GenAI) for MLflow's UI."""
    exp = mlflow.get_experiment_by_name(cfg.experiment)
    if exp is not None:
        if exp.tags.get(EXPERIMENT_KIND[0]) is None:  # made by an older specexp or by hand
            mlflow.set_experiment_tag(exp.experiment_id, *EXPERIMENT_KIND)
        return exp.experiment_id
    # Local stores keep artifacts beside the database rather than in a ./mlruns of the cwd.
    local = cfg.uri.startswith(("sqlite:", "file:")) or "://" not in cfg.uri
    location = (outputs.resolve() / "mlartifacts").as_uri() if local else None
    return mlflow.create_experiment(cfg.experiment, artifact_location=location, tags=dict([EXPERIMENT_KIND]))


def _chunks(items: list[Any]) -> Iterable[list[Any]]:
    for i in range(0, len(items), _BATCH):
        yield items[i : i + _BATCH]


def log_values(
    mlflow: MlflowClient,
    run_id: str,
    metrics: Mapping[str, float] = {},
    params: Mapping[str, Any] = {},
    tags: Mapping[str, str] = {},
) -> None:
    now = now_ms()
    metric_list = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
    param_list = [Param(k, str(v)[:6000]) for k, v in params.items()]
    tag_list = [RunTag(k, str(v)) for k, v in tags.items()]
    for part in _chunks(metric_list):
        mlflow.log_batch(run_id, metrics=part)
    for part in _chunks(param_list):
        mlflow.log_batch(run_id, params=part)
    if tag_list:
        mlflow.log_batch(run_id, tags=tag_list)


def find_parent(mlflow: MlflowClient, exp_id: str, sweep_id: str) -> str | None:
    runs = mlflow.search_runs(
        [exp_id],
        filter_string=f"tags.`specexp.sweep_id` = '{sweep_id}' and tags.`specexp.role` = '{PARENT_ROLE}'",
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


def start_parent(cfg: TrackingConfig, outputs: Path, sweep_id: str, name: str, tags: Mapping[str, str]) -> str:
    mlflow = client(cfg)
    exp_id = experiment_id(mlflow, cfg, outputs)
    run = mlflow.create_run(
        exp_id, run_name=name, tags={**tags, "specexp.sweep_id": sweep_id, "specexp.role": PARENT_ROLE}
    )
    return run.info.run_id


def open_point(
    cfg: TrackingConfig, outputs: Path, run_name: str, sweep_id: str | None, start_time: int | None = None
) -> str:
    """A point's run, RUNNING from ``start_time`` (its measured window's start; default now), under
    its sweep's parent."""
    mlflow = client(cfg)
    exp_id = experiment_id(mlflow, cfg, outputs)
    parent = find_parent(mlflow, exp_id, sweep_id) if sweep_id else None
    tags = {"mlflow.parentRunId": parent} if parent else {}
    return mlflow.create_run(exp_id, start_time=start_time or now_ms(), run_name=run_name, tags=tags).info.run_id


@contextmanager
def system_metrics(cfg: TrackingConfig, run_id: str | None) -> Iterator[None]:
    """MLflow's own system-metrics monitor (CPU, memory, disk, network; GPUs through NVML) on the run
    for the duration of the block; each block adds at least one sample, taken as it ends."""
    if run_id is None or not cfg.system_metrics_interval_s:
        yield
        return
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    client(cfg)  # quiets the monitor's start and stop lines
    monitor = SystemMetricsMonitor(
        run_id, sampling_interval=cfg.system_metrics_interval_s, resume_logging=True, tracking_uri=cfg.uri
    )
    monitor.start()
    try:
        yield
    finally:
        try:
            monitor.finish()
            monitor.collect_metrics()  # a window shorter than the interval still gets its sample
            monitor.publish_metrics(monitor.aggregate_metrics())
            monitor.mlflow_logger.flush()
        except Exception:
            log.exception("could not record system metrics for run %s", run_id)


def log_point(
    cfg: TrackingConfig,
    outputs: Path,
    run_name: str,
    metrics: Mapping[str, float],
    params: Mapping[str, Any],
    tags: Mapping[str, str],
    artifacts: Iterable[Path],
    status: str,
    sweep_id: str | None,
    run_id: str | None = None,
    end_time: int | None = None,
) -> str:
    """One point as one run (a child of its sweep's parent when there is one), opened now unless
    ``run_id`` was opened when its window started; ended at ``end_time``; returns its id."""
    mlflow = client(cfg)
    run_id = run_id or open_point(cfg, outputs, run_name, sweep_id)
    try:
        log_values(mlflow, run_id, metrics, params, tags)
        for path in artifacts:
            if path.exists():
                mlflow.log_artifact(run_id, str(path))
    finally:
        mlflow.set_terminated(run_id, status, end_time=end_time)
    return run_id
