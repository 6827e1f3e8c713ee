"""specexp's default Hydra sweeper: the basic sweeper's grid run in server order (specexp.jobs), or
an Optuna study (specexp.tune), each with a sweep id, a parent MLflow run and the sweep analysis."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn
from omegaconf import OmegaConf

from specexp import server
from specexp.config import ConfigError
from specexp.console import console
from specexp.jobs import LaunchingSweeper, compose, job_rows, plan
from specexp.report.sweep import SweepRecorder
from specexp.tune.sweeper import TuneConf, Tuner


@dataclass
class SpecexpSweeperConf(TuneConf):
    """specexp's sweeper: a server-ordered grid (``mode: grid``) or an Optuna study (``mode: optuna``).

    One sweeper for both, because a preset cannot replace the sweeper the primary config selects.
    """

    _target_: str = "hydra_plugins.specexp_sweepers.SpecexpSweeper"
    mode: str = "grid"
    max_batch_size: int | None = None
    params: dict[str, str] = field(default_factory=dict)


class SweepFailed(SystemExit):
    """Raised after a grid sweep in which some point failed: the exit code says so."""


class OrderedSweeper(LaunchingSweeper):
    """The basic sweeper's grid (``params`` and command-line sweeps), run in server order; or, with
    ``mode: optuna``, a study over ``params`` (specexp.tune)."""

    def __init__(self, mode: str = "grid", max_batch_size: int | None = None, params: Any = None, **tune: Any) -> None:
        if mode not in ("grid", "optuna"):
            raise ConfigError("hydra.sweeper.mode", f"unknown mode {mode!r}", "use grid or optuna")
        self.mode = mode
        self.max_batch_size = max_batch_size
        self.params = {str(k): str(v) for k, v in (params or {}).items()}
        self.tune = TuneConf(**tune)

    def sweep(self, arguments: list[str]) -> Any:
        if self.mode == "optuna":
            return Tuner(self, self.tune, self.params).sweep(arguments)
        return self.grid(arguments)

    def grid(self, arguments: list[str]) -> Any:
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
        recorder = None if first.dry_run else SweepRecorder.start(first, sweep_id, sweep_dir, len(jobs))
        size = self.max_batch_size or len(jobs)
        returns: list[JobReturn] = []
        try:
            for start in range(0, len(jobs), size):
                returns += self.launcher.launch(jobs[start : start + size], initial_job_idx=start)
        finally:
            server.stop()
            rows = job_rows(returns)
            if recorder is not None:
                recorder.finish(rows, interrupted=len(returns) < len(jobs))
        if any(r.get("status") not in ("ok", "dry_run") for r in rows):
            raise SweepFailed(1)
        return [returns]
