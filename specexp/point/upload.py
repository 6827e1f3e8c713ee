"""A point's MLflow run: opened as its first measured window starts (so MLflow's system monitor
samples into it), completed from the files on disk when the point ends. A failing upload never fails
the point: its results are on disk and specexp.sync sends them later."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from specexp import tracking
from specexp.config import Config, TrackingConfig
from specexp.context import RunContext
from specexp.point.plan import run_name
from specexp.point.record import ARTIFACTS, RESULTS, write_json
from specexp.result import PointResult

log = logging.getLogger("specexp")

ERROR_TAG = "specexp.error"  # why a point failed, on its run


@contextmanager
def measured_window(cfg: Config, run: RunContext, result: PointResult, span: list[int]) -> Iterator[None]:
    """One measured window: the point's run is opened as the first one starts (so MLflow's monitor
    samples the system into it); ``span`` holds the first window's start and the last one's end."""
    start = tracking.now_ms()
    if cfg.tracking.enabled and result.run_id is None:
        try:
            point_id = result.tags[tracking.POINT_ID]
            result.run_id = tracking.open_point(
                cfg.tracking, Path(cfg.outputs), run_name(cfg, run), run.sweep_id, start, point_id
            )
        except Exception as exc:  # the point goes on; its run is created when it ends
            log.error("could not open the point's MLflow run (%s)", tracking.store_message(exc))
    span[:1] = span[:1] or [start]
    try:
        with tracking.system_metrics(cfg.tracking, result.run_id):
            yield
    finally:
        span[1:] = [tracking.now_ms()]


def track(cfg: Config, result: PointResult, job_dir: Path, end_time: int | None) -> None:
    """The point uploaded when tracking is on; a failure is logged, never raised."""
    if not cfg.tracking.enabled:
        return
    try:
        upload(cfg.tracking, Path(cfg.outputs), result, job_dir, end_time)
    except Exception as exc:  # the results are on disk: specexp.sync uploads them later
        log.error("MLflow logging failed (%s); results kept in %s", tracking.store_message(exc), job_dir)


def upload(
    tracking_cfg: TrackingConfig, outputs: Path, result: PointResult, job_dir: Path, end_time: int | None = None
) -> str:
    """Send a point on disk to MLflow (its run opened at the window's start, or a new one; an upload
    that completed before is kept as it is) and note the run's id in results.json; raises when
    tracking fails."""
    result.run_id = tracking.log_point(
        tracking_cfg,
        outputs,
        run_name=result.tags.get("mlflow.runName", job_dir.name),
        metrics=result.metrics,
        params=result.params,
        tags=result.tags | ({ERROR_TAG: result.error[:5000]} if result.error else {}),
        artifacts=[job_dir / n for n in ARTIFACTS],
        status={"ok": "FINISHED", "failed": "FAILED"}.get(result.status, "KILLED"),
        sweep_id=result.tags.get("specexp.sweep_id") or None,
        run_id=result.run_id,
        end_time=end_time,
    )
    with contextlib.suppress(OSError):  # the run is found by the point's id all the same
        write_json(job_dir / RESULTS, result.to_json())
    return result.run_id


def upload_saved(tracking_cfg: TrackingConfig, outputs: Path, result: PointResult, job_dir: Path) -> PointResult:
    """A point read back from ``job_dir``, its upload completed unless it was complete (an interrupt
    may have cut it short after results.json was written); one from before point ids is left as it is."""
    if result.status != "dry_run" and not (result.run_id and tracking.POINT_ID not in result.tags):
        upload(tracking_cfg, outputs, result, job_dir)
    return result
