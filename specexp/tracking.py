"""MLflow: a parent run per multirun, a child run per point, metrics, params, tags and artifacts.

A point's run is opened when its measured window starts (so MLflow's system-metrics monitor can
sample that window into it) and filled in after the point's results are on disk, so a tracking
failure loses nothing: ``python -m specexp.sync`` uploads the folders later, and uploading twice
adds nothing (each point carries its id, ``specexp.point_id``, and its run is complete once tagged
``specexp.uploaded``). The store is checked once before any server starts (``check``), with HTTP
retries bounded so an unreachable server costs seconds, not minutes; a fresh sqlite store is created
under a file lock, since MLflow's table creation races when two processes open a new database at
once. The MlflowClient API is used directly (no global active run), so a sweeper and its jobs can
share one process without stepping on each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import re
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag

from specexp import redaction
from specexp.config import ConfigError, TrackingConfig

log = logging.getLogger("specexp")

PARENT_ROLE = "parent"
POINT_ROLE = "point"
POINT_ID = "specexp.point_id"
UPLOADED = "specexp.uploaded"
PROCESS = "specexp.process"  # host:pid:start time of the specexp process that owns a RUNNING run
# MLflow's defaults (7 retries, backoff factor 2) wait minutes on a server that is down.
HTTP_LIMITS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}
REACH_TIMEOUT_S = 5.0
SYNC_HINT = "python -m specexp.sync {folder}"
TRACKING_FAILED = 3  # exit code: the points are measured and on disk, not all of them in MLflow
_BATCH = 100  # MLflow's limit on params (and a safe size for metrics) per log_batch call
# MLflow 3's UI opens an experiment by its kind: without this tag it guesses GenAI and shows traces.
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
# MLflow's UI keeps a saved view of the runs table (filter, sort, columns) in an experiment tag
# ``mlflow.sharedViewState.<id>`` and opens it from ``?viewStateShareKey=<id>``: without one the runs
# table shows no metric or parameter column at all.
VIEW_TAG = "mlflow.sharedViewState."
# Chatter a user cannot act on: table creation on a new store, the monitor's start/stop lines.
_QUIET = ("alembic", "mlflow.system_metrics")


def store_message(exc: BaseException, limit: int = 1500) -> str:
    """What the store said, on one line and whole (a very long one cut at a word, marked so); for a
    database store, the database's own words (``database or disk is full``), not the SQL."""
    seen: BaseException | None = exc
    while seen is not None and getattr(seen, "orig", None) is None:
        seen = seen.__cause__ or seen.__context__
    if seen is not None:
        exc = seen.orig  # a SQLAlchemy error's DBAPI error
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: text.rfind(" ", 0, limit)] + " [...]"


class TrackingFailed(RuntimeError):
    """MLflow could not record something; the results are on disk and specexp.sync can upload them."""


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


def hardware() -> str:
    """The machine a point ran on, as one string a stored result can be matched by (specexp.report.
    required_lookup): the CPU's model and core count, and the GPUs this process may use."""
    return _hardware(os.environ.get("CUDA_VISIBLE_DEVICES"))


@functools.cache
def _hardware(visible: str | None) -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        names = re.findall(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
        cpu = names[0].strip() if names else cpu
    gpus: list[str] = []
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        listed = [[f.strip() for f in line.split(",", 2)] for line in out.stdout.splitlines() if line.count(",") >= 2]
        chosen = None if visible is None else {v.strip() for v in visible.split(",")}
        gpus = [name for index, uuid, name in listed if chosen is None or chosen & {index, uuid}]
    counted = ", ".join(f"{gpus.count(n)}x {n}" for n in sorted(set(gpus))) or "no GPU"
    return f"{cpu} ({os.cpu_count()} cores); {counted}"


_opened: set[str] = set()  # store URIs this process has opened (and so created) already


def client(cfg: TrackingConfig) -> MlflowClient:
    """A client for ``cfg.uri``; the first one per process opens the store under its file lock."""
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    # It logs a database error with its traceback and raises it: specexp says it once, in one line.
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    for key, value in HTTP_LIMITS.items():
        os.environ.setdefault(key, value)
    if cfg.uri in _opened:
        return MlflowClient(tracking_uri=cfg.uri)
    with _store_lock(cfg.uri):
        mlflow = MlflowClient(tracking_uri=cfg.uri)  # a new sqlite store creates its tables here
    _opened.add(cfg.uri)
    return mlflow


@contextlib.contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    """An exclusive lock beside a sqlite database (<db>.lock); nothing for other stores."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    db = Path(uri.removeprefix("sqlite:///"))
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.parent / f"{db.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def check(cfg: TrackingConfig, outputs: Path) -> None:
    """Reach the store once, before any server starts: ConfigError (one line, exit 2) when it cannot
    be used. Runs left RUNNING by a specexp process that is gone are marked KILLED on the way."""
    if not cfg.enabled:
        return
    fix = "start the tracking server, point tracking.uri at one that runs, or run with tracking.enabled=false"
    split = urllib.parse.urlsplit(cfg.uri)
    if split.scheme in ("http", "https"):
        port = split.port or (443 if split.scheme == "https" else 80)
        try:
            socket.create_connection((split.hostname, port), timeout=REACH_TIMEOUT_S).close()
        except OSError as exc:
            raise ConfigError("tracking.uri", f"{cfg.uri} cannot be reached ({exc})", fix) from None
    try:
        mlflow = client(cfg)
        exp = mlflow.get_experiment_by_name(cfg.experiment)
    except Exception as exc:
        raise ConfigError("tracking.uri", f"{cfg.uri} cannot be used ({store_message(exc)})", fix) from None
    if exp is not None and exp.lifecycle_stage == "deleted":  # MLflow refuses every run in it
        raise ConfigError(
            "tracking.experiment",
            f"experiment {cfg.experiment!r} (id {exp.experiment_id}) is deleted in {cfg.uri}",
            f"restore it (mlflow experiments restore --experiment-id {exp.experiment_id}) or choose another "
            "tracking.experiment",
        )
    mark_killed(mlflow, experiment_id(mlflow, cfg, outputs))


def process_tag() -> str:
    """This process, as ``host:pid:start time`` (the start time guards against a reused pid)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid())}"


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def _gone(tag: str) -> bool:
    """Whether the process a ``process_tag`` names has ended (False when it ran on another host)."""
    host, _, rest = tag.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return _start_time(int(pid)) != started


def mark_killed(mlflow: MlflowClient, exp_id: str) -> list[str]:
    """RUNNING runs whose specexp process is gone (SIGKILL, a second SIGINT during teardown) become
    KILLED; returns their ids."""
    stale = mlflow.search_runs([exp_id], filter_string="attributes.status = 'RUNNING'", max_results=1000)
    killed = []
    for run in stale:
        tag = run.data.tags.get(PROCESS)
        if tag and _gone(tag):
            mlflow.set_terminated(run.info.run_id, "KILLED")
            killed.append(run.info.run_id)
            log.warning("marked run %s (%s) KILLED: its specexp process is gone", run.info.run_id, run.info.run_name)
    return killed


def ui_path(exp_id: str, run_id: str | None = None, view: str | None = None) -> str:
    """The MLflow UI's page of an experiment (or a run, or the runs table in a saved ``view``) on its
    runs: MLflow 3's UI otherwise starts on its GenAI pages whatever the experiment's kind, until a
    user picks "Model training"."""
    if view is not None:  # the runs tab itself: the experiment's page redirects to it, dropping the key
        return f"#/experiments/{exp_id}/runs?viewStateShareKey={view}&workflowType=machine_learning"
    return f"#/experiments/{exp_id}" + (f"/runs/{run_id}" if run_id else "") + "?workflowType=machine_learning"


def ui_url(cfg: TrackingConfig, exp_id: str, run_id: str | None = None, view: str | None = None) -> str:
    """The page on the tracking server, or on ``mlflow ui --port <tracking.ui_port>`` for a local store."""
    base = cfg.uri.rstrip("/") if cfg.uri.startswith(("http://", "https://")) else f"http://127.0.0.1:{cfg.ui_port}"
    return f"{base}/{ui_path(exp_id, run_id, view)}"


def ui_hint(cfg: TrackingConfig, exp_id: str, run_id: str | None = None) -> str:
    """Where to look: the page on the tracking server, or how to serve a local store and the page."""
    if cfg.uri.startswith(("http://", "https://")):
        return ui_url(cfg, exp_id, run_id)
    return f"mlflow ui --backend-store-uri {cfg.uri} --port {cfg.ui_port}, then {ui_url(cfg, exp_id, run_id)}"


def save_points_view(
    mlflow: MlflowClient,
    exp_id: str,
    sweep_id: str,
    name: str,
    params: Sequence[str],
    metrics: Sequence[str],
    tags: Sequence[str] = (),
) -> str:
    """A saved view of MLflow's runs table holding the sweep's points only (its parent left out, so
    they are rows of their own rather than folded under it), with ``tags``, ``params`` and
    ``metrics`` as columns, the first metric's highest first; returns its id for ``ui_path``.

    Written as MLflow's UI writes one ("Views" → "Save as new view"): a JSON envelope whose
    ``state`` is the view's JSON (the UI reads it plain or deflated); saving it again replaces it."""
    view = f"specexp-{sweep_id}"
    columns = [*(f"tags.`{k}`" for k in tags), *(f"params.`{k}`" for k in params)]
    state = {
        "searchFilter": f"tags.`specexp.sweep_id` = '{sweep_id}' and tags.`specexp.role` = '{POINT_ROLE}'",
        "orderByKey": f"metrics.`{metrics[0]}`" if metrics else "attributes.start_time",
        "orderByAsc": not metrics,
        "selectedColumns": [*columns, *(f"metrics.`{k}`" for k in metrics)],
    }
    now = now_ms()
    envelope = {"name": name, "createdAt": now, "updatedAt": now, "state": json.dumps(state)}
    mlflow.set_experiment_tag(exp_id, VIEW_TAG + view, json.dumps(envelope))
    return view


def run_link(cfg: TrackingConfig, run_id: str) -> str:
    """``ui_hint`` for one run, its experiment looked up."""
    return ui_hint(cfg, client(cfg).get_run(run_id).info.experiment_id, run_id)


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


def metric_key(name: str) -> str:
    """A name MLflow accepts as a metric key (it refuses the whole batch over one ``@``): characters
    other than letters, digits, ``_ - . : /`` and space become ``_``."""
    return re.sub(r"[^\w\-.:/ ]", "_", name)


def log_values(
    mlflow: MlflowClient,
    run_id: str,
    metrics: Mapping[str, float] = {},
    params: Mapping[str, Any] = {},
    tags: Mapping[str, str] = {},
    changed_only: bool = False,
) -> None:
    """Metrics, params and tags in batches, secrets masked; ``changed_only`` skips metrics whose
    latest value is the same already (a summary updated after every point, or synced twice)."""
    metrics = {metric_key(k): v for k, v in metrics.items()}
    if changed_only and metrics:
        latest = mlflow.get_run(run_id).data.metrics
        metrics = {k: v for k, v in metrics.items() if latest.get(k) != float(v)}
    params, tags = redaction.scrub_data(dict(params)), redaction.scrub_data(dict(tags))
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


def start_parent(
    cfg: TrackingConfig,
    outputs: Path,
    sweep_id: str,
    name: str,
    tags: Mapping[str, str],
    params: Mapping[str, Any] = {},
) -> str:
    """The sweep's parent run, RUNNING: the one it has (a resumed sweep, which keeps the name and
    params it started with), else a new one with ``params``."""
    mlflow = client(cfg)
    exp_id = experiment_id(mlflow, cfg, outputs)
    tags = {**tags, PROCESS: process_tag()}
    parent = find_parent(mlflow, exp_id, sweep_id)
    if parent is not None:
        mlflow.update_run(parent, status="RUNNING")
        log_values(mlflow, parent, tags=tags)
        return parent
    run = mlflow.create_run(
        exp_id, run_name=name, tags={**tags, "specexp.sweep_id": sweep_id, "specexp.role": PARENT_ROLE}
    )
    log_values(mlflow, run.info.run_id, params=params)
    return run.info.run_id


def open_point(
    cfg: TrackingConfig,
    outputs: Path,
    run_name: str,
    sweep_id: str | None,
    start_time: int | None = None,
    point_id: str | None = None,
) -> str:
    """A point's run, RUNNING from ``start_time`` (its measured window's start; default now), under
    its sweep's parent, tagged as a point (``specexp.role``, what its sweep's view selects), with the
    point's id and this process (KILLED at a later start if the process dies first)."""
    mlflow = client(cfg)
    exp_id = experiment_id(mlflow, cfg, outputs)
    parent = find_parent(mlflow, exp_id, sweep_id) if sweep_id else None
    tags = {"mlflow.parentRunId": parent} if parent else {}
    tags |= {"specexp.role": POINT_ROLE, PROCESS: process_tag(), **({POINT_ID: point_id} if point_id else {})}
    return mlflow.create_run(exp_id, start_time=start_time or now_ms(), run_name=run_name, tags=tags).info.run_id


def find_point(mlflow: MlflowClient, exp_id: str, point_id: str) -> str | None:
    runs = mlflow.search_runs([exp_id], filter_string=f"tags.`{POINT_ID}` = '{point_id}'", max_results=1)
    return runs[0].info.run_id if runs else None


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
        except Exception as exc:
            log.error("could not record system metrics for run %s (%s)", run_id, store_message(exc))


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
    ``run_id`` (or a run with the point's ``specexp.point_id``) was opened when its window started;
    ended at ``end_time``; returns its id. A run uploaded completely before is left as it is, one
    left half done (KILLED) is completed: uploading again adds nothing."""
    mlflow = client(cfg)
    point_id = tags.get(POINT_ID)
    if run_id is None and point_id:
        run_id = find_point(mlflow, experiment_id(mlflow, cfg, outputs), point_id)
    if run_id is not None and mlflow.get_run(run_id).data.tags.get(UPLOADED) == "true":
        return run_id
    run_id = run_id or open_point(cfg, outputs, run_name, sweep_id, point_id=point_id)
    try:
        log_values(mlflow, run_id, metrics, params, tags, changed_only=True)
        for path in artifacts:
            if path.exists():
                mlflow.log_artifact(run_id, str(path))
        mlflow.set_tag(run_id, UPLOADED, "true")
    except BaseException:  # cut short (an interrupt, the store): never FINISHED half uploaded
        with contextlib.suppress(Exception):
            mlflow.set_terminated(run_id, "KILLED", end_time=end_time)
        raise
    mlflow.set_terminated(run_id, status, end_time=end_time)
    return run_id
