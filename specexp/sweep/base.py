"""The skeleton every specexp sweep runs on: compose and plan jobs, launch them through Hydra's
launcher, and record the sweep (id, folder, parent run, summary) whatever way it ends.

Not a BasicSweeper subclass: Hydra's plugin scan re-executes that module, which breaks its
``super()`` calls in subclasses.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from specexp import server
from specexp.config import Config
from specexp.configstore import to_config
from specexp.console import invalid_config_exits
from specexp.result import PointResult
from specexp.sweep import plan
from specexp.sweep.recorder import SweepRecorder


def point_results(returns: Sequence[JobReturn]) -> list[PointResult]:
    """Each job's result; a job that raised becomes a failed point carrying the exception."""
    out = []
    for r in returns:
        if r.status == JobStatus.COMPLETED and isinstance(r.return_value, dict):
            out.append(PointResult.from_json(r.return_value))
        else:
            out.append(PointResult(status="failed", error=str(r._return_value)))
    return out


@dataclass
class SweepRun:
    """A sweep in progress: what its points returned, and what a sweeper adds to its summary."""

    sweep_id: str
    sweep_dir: Path
    returns: list[JobReturn] = field(default_factory=list)
    results: list[PointResult] = field(default_factory=list)
    # extra parent metrics, files, and the answer in words (a study's best settings)
    summarize: Callable[[], tuple[dict[str, float], list[Path], list[str]]] | None = None
    kind: str = "grid"  # grid | study: what the parent run holds
    name: str = ""  # the parent run's name: what was swept
    params: dict[str, str] = field(default_factory=dict)  # swept axes and the fixed configuration
    settings: list[str] = field(default_factory=list)  # keys shown as table columns (a study's tuned ones)


class LaunchingSweeper(Sweeper):
    """Hydra's context, the config and the launcher, and the sweep skeleton both modes share."""

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def compose(self, overrides: Sequence[str]) -> Config:
        return to_config(self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides)))

    def plan(self, jobs: list[list[str]], sweep_id: str, names: list[str] | None = None) -> list[list[str]]:
        return plan.plan(self.compose, jobs, sweep_id, names)

    def launch(self, run: SweepRun, jobs: list[list[str]], start: int) -> list[PointResult]:
        """Run jobs through Hydra's launcher; their results join the sweep's."""
        returns = self.launcher.launch(jobs, initial_job_idx=start)
        results = point_results(returns)
        run.returns += returns
        run.results += results
        return results

    def new_run(self) -> SweepRun:
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        return SweepRun(f"{sweep_dir.name}-{uuid.uuid4().hex[:6]}", sweep_dir)

    def checked_plan(self, jobs: list[list[str]], sweep_id: str) -> list[list[str]]:
        """``plan``, with an invalid job ending the sweep before any server starts (exit 2)."""
        with invalid_config_exits():
            return self.plan(jobs, sweep_id)

    def record(self, run: SweepRun, first: Config, expected: int, body: Callable[[SweepRun], None]) -> None:
        """Run ``body`` as the sweep, with a parent run and, whatever way it ends (done, failed,
        interrupted), no server left running and the summary written."""
        recorder = (
            None
            if first.dry_run
            else SweepRecorder.start(
                first, run.sweep_id, run.sweep_dir, expected, run.kind, run.name or f"sweep-{run.sweep_id}", run.params
            )
        )
        interrupted = True
        try:
            body(run)
            interrupted = False
        finally:
            server.stop()
            if recorder is not None:
                extra_metrics, extra_files, answer = run.summarize() if run.summarize else ({}, [], [])
                recorder.finish(run.results, interrupted, extra_metrics, extra_files, answer, run.settings)
