"""MLflow: a parent run per multirun, a child run per point, metrics, params, tags and artifacts.

Everything here runs after the point's results are on disk, so a tracking failure loses nothing.
The MlflowClient API is used directly (no global active run), so a sweeper and its jobs can share
one process without stepping on each other.
"""

from __future__ import annotations

import functools
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag

from specexp.config import TrackingConfig

PARENT_ROLE = "parent"
_BATCH = 100  # MLflow's limit on params (and a safe size for metrics) per log_batch call


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
    return MlflowClient(tracking_uri=cfg.uri)


def experiment_id(mlflow: MlflowClient, cfg: TrackingConfig, outputs: Path) -> str:
    exp = mlflow.get_experiment_by_name(cfg.experiment)
    if exp is not None:
        return exp.experiment_id
    # Local stores keep artifacts beside the database rather than in a ./mlruns of the cwd.
    local = cfg.uri.startswith(("sqlite:", "file:")) or "://" not in cfg.uri
    location = (outputs.resolve() / "mlartifacts").as_uri() if local else None
    return mlflow.create_experiment(cfg.experiment, artifact_location=location)


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
    now = int(time.time() * 1000)
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
) -> str:
    """One point as one run (a child of its sweep's parent when there is one); returns its id."""
    mlflow = client(cfg)
    exp_id = experiment_id(mlflow, cfg, outputs)
    run_tags = dict(tags)
    parent = find_parent(mlflow, exp_id, sweep_id) if sweep_id else None
    if parent:
        run_tags["mlflow.parentRunId"] = parent
    run_id = mlflow.create_run(exp_id, run_name=run_name, tags=run_tags).info.run_id
    try:
        log_values(mlflow, run_id, metrics, params)
        for path in artifacts:
            if path.exists():
                mlflow.log_artifact(run_id, str(path))
    finally:
        mlflow.set_terminated(run_id, status)
    return run_id
