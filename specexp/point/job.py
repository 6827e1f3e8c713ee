"""One point measured and recorded, as one job of a run or a sweep: the steps in order, plan ->
serve -> windows -> record -> upload. Results reach the disk before anything is sent anywhere; a
failing point is recorded as failed (with the server log) and returns; only interrupts go on up."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig
from submitit.core.utils import UncompletedJobError

from specexp import atomic, live, redaction, signals
from specexp.config import Config, ConfigError
from specexp.console import fmt
from specexp.context import RunContext
from specexp.metrics.joint_stop import stopping
from specexp.metrics.window_results import aggregate
from specexp.point.plan import ServerPlan, describe, ensure_models, new_result, preflight, run_name, warn_synthetic
from specexp.point.record import RESULTS, save, save_config, save_server, save_traceback
from specexp.point.serve import ServerLog, planned_log, serve
from specexp.point.upload import measured_window, track
from specexp.point.watch import ServerLost, server_cause
from specexp.point.windows import Collected, fold, measure_windows
from specexp.result import PointResult

log = logging.getLogger("specexp")

Turn = Callable[[], AbstractContextManager[object]]


@dataclass
class Underway:
    """How far a point got: its server's log and what its windows received, kept for the record
    whatever stops it."""

    log: ServerLog
    collected: Collected = field(default_factory=Collected)
    span: list[int] = field(default_factory=list)  # the measured windows, ms since the epoch: start and end

    @property
    def end_time(self) -> int | None:
        return self.span[1] if len(self.span) > 1 else None


def run(
    cfg: Config, run: RunContext, raw: DictConfig, job_dir: Path, job_num: int, turn: Turn = nullcontext
) -> PointResult:
    """Measure one point of ``cfg`` (with what its sweep decided, ``run``) and record it; never raises
    for a failed point (only for interrupts, and for a job folder that already holds results, which
    nothing may write over). ``turn`` is entered around each measured window (arms taking turns,
    specexp.sweep.turns)."""
    if (job_dir / RESULTS).exists():
        raise FileExistsError(f"{job_dir} already holds the results of another point; nothing is written over them")
    job_dir.mkdir(parents=True, exist_ok=True)
    redaction.remember_config(cfg)
    plan = describe(cfg, run)
    result = new_result(cfg, run, raw, plan, job_dir)
    if cfg.workload.synthetic and cfg.drafter.speculative:
        warn_synthetic(cfg.workload.name)
    point = Underway(planned_log(cfg, plan.key))
    live.point_started(job_num + 1, run_name(cfg, run), cfg.measure.windows)
    try:
        _measure(cfg, run, raw, plan, result, point, job_dir, job_num, turn)
    except BaseException as exc:
        if (why := interruption(exc)) is not None:
            result.status, result.error = "interrupted", why
            raise
        if not isinstance(exc, Exception):
            raise
        _failed(cfg, result, point, exc, job_dir)  # a failing point is recorded and the sweep goes on
    finally:
        result.tags["specexp.status"] = result.status
        with signals.deferred():  # a second Ctrl-C does not cut the point's record short
            save(result, job_dir, point.log, point.collected.records)
            track(cfg, result, job_dir, point.end_time)
        live.point_ended(result.status, live_summary(result))
    return result


def interruption(exc: BaseException) -> str | None:
    """Why a point was interrupted, where ``exc`` stops its job from outside (a resume measures it
    again): Ctrl-C, an exit, or submitit's last time-out (or one it cannot requeue), which its signal
    handler raises as UncompletedJobError in the middle of the point. None for a failure of the point."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (SIGINT)"
    if isinstance(exc, SystemExit):
        return f"interrupted (exit {exc.code})"
    if isinstance(exc, UncompletedJobError):
        return f"interrupted by the scheduler ({exc})"
    return None


def _measure(
    cfg: Config,
    run: RunContext,
    raw: DictConfig,
    plan: ServerPlan,
    result: PointResult,
    point: Underway,
    job_dir: Path,
    job_num: int,
    turn: Turn,
) -> None:
    """The point's steps when nothing goes wrong: config saved, checks, its server, its windows."""
    save_config(raw, job_dir)
    ensure_models(cfg)
    preflight(cfg, run)
    served = serve(cfg, run, plan, point.log)
    point.log = served.log
    result.metrics |= served.metrics
    save_server(served, job_dir)
    result.tags |= served.tags
    # unique per sweep and job (each launch of a repeated point is a job); a single run uses its
    # folder's name (new each run)
    stream = f"{run.sweep_id or job_dir.name}/{job_num}"
    window = functools.partial(in_turn, turn, functools.partial(measured_window, cfg, run, result, point.span))
    got = point.collected
    rule = stopping(turn, cfg.measure, baseline=not cfg.drafter.speculative)
    asyncio.run(measure_windows(cfg, run, plan.engine, served.srv, stream, got.windows, got.received, window, rule))
    result.tags["specexp.stopped_on"] = rule.stopped_on  # its own throughput, or its arms' speedups
    fold(cfg, result, got, launched=plan.command is not None)
    if result.metrics.get("requests_ok", 0) == 0:
        records = got.records
        first = records[0].error if records else "-"
        cause = server_cause(point.log.path, point.log.start)
        raise RuntimeError(f"every measured request failed; first error: {first}{cause}")


def _failed(cfg: Config, result: PointResult, point: Underway, exc: Exception, job_dir: Path) -> None:
    """A point that failed, recorded so: why, in one line (an unexpected error's traceback goes to
    the point's folder, not the console)."""
    if isinstance(exc, ConfigError):  # the engine's own parser refused the argv: nothing was started
        log.error("%s", exc)
        result.status, result.error = "failed", f"ConfigError: {exc}"
    elif isinstance(exc, ServerLost):  # the evidence: what was received, the exit code or state, the log's tail
        log.error("%s", exc)
        records = point.collected.records
        kept = f"{len(records)} records kept, marked partial" if records else "no records received"
        result.status, result.error = "failed", f"{exc} ({kept})"
        if records:
            result.tags["specexp.records"] = "partial"
        if point.collected.windows:  # the windows that finished keep their metrics
            result.windows = [m.metrics for m in point.collected.windows]
            result.metrics |= aggregate(result.windows, cfg.measure)
    elif atomic.is_write_error(exc):  # said in one line: the disk, not specexp, needs fixing
        log.error("%s: the point is recorded as failed", atomic.reason(exc))
        result.status, result.error = "failed", atomic.reason(exc)
    else:
        log.error("%s", save_traceback(exc, job_dir))
        result.status, result.error = "failed", f"{type(exc).__name__}: {exc}"


@contextmanager
def in_turn(turn: Turn, window: Callable[[], AbstractContextManager[None]]) -> Iterator[None]:
    """A measured window once it is this point's turn."""
    with turn(), window():
        yield


def live_summary(result: PointResult) -> str:
    """A point's headline figures (or its error's first line) for the line that says it ended."""
    if result.status != "ok":
        return (result.error or result.status).splitlines()[0][:200]
    m = result.metrics
    shown = fmt(m.get("output_throughput", 0.0), 1, m.get("output_throughput_ci95")) + " tok/s"
    if "accept_length" in m:
        shown += f" · accept length {m['accept_length']:.2f}"
    return shown + f" · {int(m.get('windows', 0))} windows"
