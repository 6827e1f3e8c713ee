"""The job side of a server group: its points in order on one server, in whatever process or node the
launcher put the job.

Each point is composed here from its overrides with Hydra's compose API (the same config files and
command-line settings the sweeper validated), so the manifest stays a readable list of overrides. A
job may run again (requeued after pre-emption, or resumed): a point whose folder holds an ok result
is kept, not measured again; an earlier unfinished attempt is moved aside (``<num>.attempt<k>``),
never written over. The server goes down when the group ends, however it ends.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from hydra import compose
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from specexp import redaction, servers
from specexp.config import Config
from specexp.configstore import to_job
from specexp.context import RunContext
from specexp.point.job import run
from specexp.point.plan import flat_params, show
from specexp.result import PointResult
from specexp.sweep import turns
from specexp.sweep.groups import ATTEMPTS, MANIFEST, Group, Point, saved_result

# Told of each point as it ends: the sweeper, when the job runs in its process (the basic launcher).
_listeners: list[Callable[[PointResult], None]] = []


def is_group(job_dir: Path) -> bool:
    return (job_dir / MANIFEST).exists()


@contextlib.contextmanager
def reporting(listener: Callable[[PointResult], None]) -> Iterator[None]:
    """Group jobs run inside tell ``listener`` of each point as it ends (in this process only)."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


@contextlib.contextmanager
def visible_devices(devices: list[str] | None) -> Iterator[None]:
    """CUDA_VISIBLE_DEVICES for the servers started inside (they inherit it), restored afterwards:
    under the basic launcher groups follow each other in one process."""
    if devices is None:
        yield
        return
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


def set_aside(folder: Path) -> Path | None:
    """Move an unfinished attempt's folder out of the way, numbered, so nothing of it is lost; returns
    where it went."""
    if not folder.exists():
        return None
    attempt = 1
    while (aside := folder.with_name(f"{folder.name}.attempt{attempt}")).exists():
        attempt += 1
    folder.rename(aside)
    return aside


def unmasked(overrides: list[str], own: list[str]) -> list[str]:
    """A point's overrides with the values the manifest masks taken from the job's own overrides (its
    group's first point, as the launcher handed them): a group's points share one server, and so its
    environment, the only place a secret can be set."""
    real = {redaction.override_key(o): o for o in own}
    out = []
    for o in overrides:
        if redaction.MASK in o:
            key = redaction.override_key(o)
            if key not in real:
                raise ValueError(f"{key}: its value is masked in {MANIFEST} and not among the job's overrides")
            o = real[key]
        out.append(o)
    return out


Composed = tuple[Config, RunContext, DictConfig]


def composed(p: Point) -> Composed:
    """A point's config and run-time context (what the sweep decided for it), composed from its
    overrides (in the job's main thread: Hydra's compose API is process-wide state)."""
    hc = HydraConfig.get()
    overrides = unmasked(p.overrides, list(hc.overrides.task))
    raw = compose(hc.job.config_name, overrides=[*hc.overrides.hydra, *overrides])
    return (*to_job(raw), raw)


def run_point(
    sweep_dir: Path, p: Point, config: Composed, turn: Callable[[], object] = contextlib.nullcontext
) -> PointResult:
    """Measure one point into ``<sweep>/<num>``, unless that folder already holds its ok result: the
    same whole configuration, sweep id included (another sweep's point in a reused folder is not)."""
    cfg, run_context, raw = config
    if cfg.dry_run:
        return show(cfg, run_context, raw)
    folder = sweep_dir / str(p.num)
    kept = saved_result(folder)
    if kept is not None and kept.ok and kept.params == json.loads(json.dumps(flat_params(raw), default=str)):
        return kept
    set_aside(folder)
    return run(cfg, run_context, raw, folder, p.num, turn)


def run_turn(sweep_dir: Path, points: list[Point]) -> list[PointResult]:
    """Points at one load of arms taking turns: measured side by side, their windows alternating;
    one point (or a dry run) simply in order."""
    configs = [composed(p) for p in points]
    if len(points) == 1 or any(cfg.dry_run for cfg, _, _ in configs):
        return [run_point(sweep_dir, p, c) for p, c in zip(points, configs, strict=True)]
    work = [functools.partial(run_point, sweep_dir, p, c) for p, c in zip(points, configs, strict=True)]
    outcomes = turns.side_by_side(work, on_interrupt=servers.stop)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes


def log_attempt(job_dir: Path, **event: object) -> None:
    """One line per start and end of the group's job in ``attempts.jsonl``: where and when it ran; a
    start without an end is a job that was killed."""
    event |= {"time": time.time(), "host": socket.gethostname(), "pid": os.getpid()}
    if "SLURM_JOB_ID" in os.environ:
        event["slurm_job_id"] = os.environ["SLURM_JOB_ID"]
    with (job_dir / ATTEMPTS).open("a") as f:
        f.write(json.dumps(event) + "\n")


def run_group(job_dir: Path) -> list[PointResult]:
    """Measure the group's points in order; an interrupt (SIGINT, SIGTERM, a scheduler's pre-emption)
    leaves the point recorded as interrupted and goes on up, so the launcher sees the job end early."""
    group = Group.load(job_dir)
    sweep_dir = job_dir.parent.parent
    log_attempt(job_dir, event="start", devices=group.devices)
    ended = "done"
    with visible_devices(group.devices), servers.holding(group.servers):
        try:
            results = []
            for _, together in itertools.groupby(group.points, key=lambda p: (p.num,) if p.turn is None else p.turn):
                for result in run_turn(sweep_dir, list(together)):
                    results.append(result)
                    for listener in _listeners:
                        listener(result)
            return results
        except BaseException as exc:
            ended = f"{type(exc).__name__}: {exc}"
            raise
        finally:  # the servers go down as ``holding`` ends
            log_attempt(job_dir, event="end", status=ended)
