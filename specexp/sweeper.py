"""specexp's default Hydra sweeper: the basic sweeper's job list, reordered so jobs that share a
server run back to back, with a sweep id, a parent MLflow run and the sweep-level analysis.

Hydra varies the last override fastest, so ``batch=1,4 drafter=none,tiny`` alternates drafters and
would relaunch the server for every job. Here every job's config is composed and validated first
(so bad input fails before any server starts), grouped by its server key in order of first
appearance, and told the largest batch of its group (``max_batch``) so the one server admits it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from specexp.config import Config, ConfigError
from specexp.configstore import load
from specexp.console import console

log = logging.getLogger("specexp")


@dataclass
class SpecexpSweeperConf:
    _target_: str = "hydra_plugins.specexp_sweepers.SpecexpSweeper"
    max_batch_size: int | None = None
    params: dict[str, str] | None = None


@dataclass
class Job:
    overrides: list[str]
    cfg: Config
    group: str
    extra: list[str] = field(default_factory=list)


class SweepFailed(SystemExit):
    """Raised after a sweep in which some point failed: the exit code says so."""


def group_key(cfg: Config, global_max: int) -> str:
    """The server key with the capacity fixed, so jobs differing only in batch group together."""
    from specexp.point import describe

    probe = Config(**{**cfg.__dict__, "max_batch": max(global_max, cfg.batch)})
    return describe(probe)[2]


def compose(sweeper: OrderedSweeper, overrides: Sequence[str]) -> tuple[Config, DictConfig]:
    raw = sweeper.hydra_context.config_loader.load_sweep_config(sweeper.config, list(overrides))
    return load(raw), raw


def plan(sweeper: OrderedSweeper, jobs: list[list[str]], sweep_id: str) -> list[list[str]]:
    """Jobs ordered by server, each with ``sweep_id`` and its server's ``max_batch`` appended."""
    composed = [compose(sweeper, o)[0] for o in jobs]
    global_max = max(c.batch for c in composed)
    planned = [Job(o, c, group_key(c, global_max)) for o, c in zip(jobs, composed, strict=True)]
    order = {g: i for i, g in reversed(list(enumerate(j.group for j in planned)))}
    planned.sort(key=lambda j: order[j.group])  # stable: the command line's order within a server
    group_max: dict[str, int] = {}
    for j in planned:
        group_max[j.group] = max(group_max.get(j.group, 0), j.cfg.batch)
    return [[*j.overrides, f"sweep_id={sweep_id}", f"max_batch={group_max[j.group]}"] for j in planned]


def job_rows(returns: Sequence[JobReturn]) -> list[dict[str, Any]]:
    rows = []
    for r in returns:
        if r.status == JobStatus.COMPLETED and isinstance(r.return_value, dict):
            rows.append(r.return_value)
        else:
            rows.append({"status": "failed", "params": {}, "metrics": {}, "error": str(r._return_value)})
    return rows


class OrderedSweeper(Sweeper):
    """The basic sweeper's grid (``params`` and command-line sweeps), run in server order.

    Not a BasicSweeper subclass: Hydra's plugin scan re-executes that module, which breaks its
    ``super()`` calls in subclasses; its grid expansion is reused as a static function.
    """

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        self.max_batch_size = max_batch_size
        self.params = params or {}

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        params = [f"{k}={v}" for k, v in self.params.items()] + list(arguments)
        overrides = OverridesParser.create(config_loader=self.hydra_context.config_loader).parse_overrides(params)
        jobs = [job for chunk in BasicSweeper.split_arguments(overrides, None) for job in chunk]
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_id = f"{sweep_dir.name}-{uuid.uuid4().hex[:6]}"
        try:
            jobs = plan(self, jobs, sweep_id)
        except ConfigError as exc:
            console.print(f"[red]invalid configuration[/red]: {exc}")
            raise SystemExit(2) from None
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        first, _ = compose(self, jobs[0])
        from specexp.report.sweep import SweepRecorder

        recorder = None if first.dry_run else SweepRecorder.start(first, sweep_id, sweep_dir, len(jobs))
        size = self.max_batch_size or len(jobs)
        returns: list[JobReturn] = []
        try:
            for start in range(0, len(jobs), size):
                returns += self.launcher.launch(jobs[start : start + size], initial_job_idx=start)
        finally:
            from specexp import server

            server.stop()
            if recorder is not None:
                recorder.finish(job_rows(returns), interrupted=len(returns) < len(jobs))
        failed = [r for r in job_rows(returns) if r.get("status") not in ("ok", "dry_run")]
        if failed:
            raise SweepFailed(1)
        return [returns]
