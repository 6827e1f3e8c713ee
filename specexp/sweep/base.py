"""The skeleton every specexp sweep runs on: compose and plan jobs, launch them through Hydra's
launcher, and record the sweep (id, folder, parent run, summary) after every point and whatever way
it ends.

Not a BasicSweeper subclass: Hydra's plugin scan re-executes that module, which breaks its
``super()`` calls in subclasses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from specexp import secrets, server, tracking
from specexp.config import Config
from specexp.configstore import run_id, to_config
from specexp.console import console, invalid_config_exits
from specexp.point import flat_params
from specexp.result import PointResult
from specexp.sweep import folder, plan
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
    """A sweep in progress: what its points returned, and what a sweeper adds to its summary.

    A resumed sweep starts with the results already in its folder (``earlier``) and numbers its new
    jobs after them (``next_job``)."""

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
    earlier: list[PointResult] = field(default_factory=list)
    next_job: int = 0
    running: list[int] = field(default_factory=list)  # job numbers launched and not yet returned
    recorder: SweepRecorder | None = None

    def points(self) -> list[PointResult]:
        """Every point of the sweep, earlier invocations' included, a failed attempt replaced by a rerun."""
        return folder.current([*self.earlier, *self.results])

    def collect_running(self) -> None:
        """Results of jobs cut short (an interrupt inside the launcher) from their folders on disk."""
        for number in self.running:
            path = self.sweep_dir / str(number) / folder.RESULTS
            if path.is_file():
                self.results.append(PointResult.from_json(json.loads(path.read_text())))
        self.running = []


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

    def launch(self, run: SweepRun, jobs: list[list[str]]) -> list[PointResult]:
        """Run jobs through Hydra's launcher, numbered after every job the folder holds; their results
        join the sweep's. Jobs that run one after another in this process anyway (the basic launcher)
        are launched one by one, so the sweep's record follows every point."""
        step = 1 if isinstance(self.launcher, BasicLauncher) else max(len(jobs), 1)
        results = []
        for i in range(0, len(jobs), step):
            chunk = jobs[i : i + step]
            run.running = list(range(run.next_job, run.next_job + len(chunk)))
            run.next_job += len(chunk)
            returns = self.launcher.launch(chunk, initial_job_idx=run.running[0])
            run.running = []
            run.returns += returns
            got = point_results(returns)
            results += got
            run.results += got
            if run.recorder is not None:
                run.recorder.update(run.points())
        return results

    def new_run(self) -> SweepRun:
        """The sweep's folder and id: a new one, or (``resume=``, or a folder holding a sweep already)
        the sweep to continue, with its results so far."""
        with invalid_config_exits():
            resume = self.config.get("resume")
            sweep_dir = folder.find(resume, Path(str(self.config.outputs))) if resume else None
        sweep_dir = sweep_dir or Path(self.config.hydra.sweep.dir)
        record = folder.read_record(sweep_dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        # Job folders go here: every job's config is composed again from the master's hydra overrides.
        quoted = "'" + str(sweep_dir).replace("\\", "\\\\").replace("'", "\\'") + "'"
        with read_write(self.config), open_dict(self.config):
            self.config.hydra.sweep.dir = str(sweep_dir)
            self.config.hydra.overrides.hydra.append(f"hydra.sweep.dir={quoted}")
        run = SweepRun(record["sweep_id"] if record else run_id(), sweep_dir, next_job=folder.next_job(sweep_dir))
        if record is not None:
            run.earlier = list(folder.job_results(sweep_dir).values())
            done = sum(r.ok for r in folder.current(run.earlier))
            console.print(f"resuming sweep {run.sweep_id} in {sweep_dir}: {done} point(s) finished ok already")
        return run

    @staticmethod
    def job_arguments(arguments: Sequence[str]) -> list[str]:
        """The command line's overrides for the jobs: ``resume`` belongs to the sweep, not its points."""
        return [a for a in arguments if not a.lstrip("+").startswith("resume=")]

    def remaining(self, run: SweepRun, jobs: list[list[str]]) -> list[list[str]]:
        """The planned jobs whose point has not finished ok in this sweep yet (all, for a new sweep)."""
        done = {folder.point_key(r.params) for r in run.earlier if r.ok}
        if not done:
            return jobs
        loader = self.hydra_context.config_loader
        keys = []
        for job in jobs:
            raw = loader.load_sweep_config(self.config, list(job))
            with open_dict(raw):
                raw.pop("hydra", None)
            keys.append(folder.point_key(flat_params(raw)))
        return [job for job, key in zip(jobs, keys, strict=True) if key not in done]

    def checked_plan(self, jobs: list[list[str]], sweep_id: str) -> list[list[str]]:
        """``plan``, with an invalid job ending the sweep before any server starts (exit 2)."""
        with invalid_config_exits():
            return self.plan(jobs, sweep_id)

    def record(self, run: SweepRun, first: Config, body: Callable[[SweepRun], None]) -> None:
        """Run ``body`` as the sweep, with a parent run (tracking checked first, before any server
        starts) and, whatever way it ends (done, failed, interrupted), no server left running and the
        summary written."""
        multirun = run.sweep_dir / "multirun.yaml"
        if not multirun.exists():  # a resumed sweep keeps the record of how it started
            multirun.write_text(secrets.scrub(OmegaConf.to_yaml(self.config)))
        if not first.dry_run:
            with invalid_config_exits():
                tracking.check(first.tracking, Path(first.outputs))
            name = run.name or f"sweep-{run.sweep_id}"
            try:
                run.recorder = SweepRecorder.start(
                    first.tracking,
                    Path(first.outputs),
                    run.sweep_id,
                    run.sweep_dir,
                    run.kind,
                    name,
                    run.params,
                    run.settings,
                )
            except tracking.TrackingFailed as exc:
                console.print(f"[red]tracking failed[/red]: {exc}")
                raise SystemExit(tracking.TRACKING_FAILED) from None
        interrupted = True
        try:
            body(run)
            interrupted = False
        finally:
            server.stop()
            run.collect_running()
            if run.recorder is not None:
                extra_metrics, extra_files, answer = run.summarize() if run.summarize else ({}, [], [])
                run.recorder.finish(run.points(), interrupted, extra_metrics, extra_files, answer)
