"""The skeleton every specexp sweep runs on: compose and plan jobs, launch them through Hydra's
launcher as server groups, and record the sweep (id, folder, parent run, summary) after every point
and whatever way it ends.

One launcher job per server group, whatever the launcher. With the basic launcher the groups follow
each other in this process, one server launch each, and the job reports each point as it ends, so
the record follows every point. With a launcher that runs jobs elsewhere (submitit_local,
submitit_slurm) the groups run side by side: a thread here per group waits for its job, so one group
that fails or is killed ends only itself, and the record follows every group; on this node the GPUs
are dealt out in disjoint slices (specexp.sweep.resources). Either way results come back in plan order.

Not a BasicSweeper subclass: Hydra's plugin scan re-executes that module, which breaks its
``super()`` calls in subclasses.
"""

from __future__ import annotations

import copy
import itertools
import logging
import queue
import shlex
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from specexp import atomic, checks, live, redaction, servers, signals, tracking
from specexp.config import Config, ConfigError
from specexp.configstore import run_id, to_config
from specexp.console import console, invalid_config_exits
from specexp.point.plan import flat_params
from specexp.result import PointResult
from specexp.sweep import folder, resources, runner
from specexp.sweep import job_plan as plan
from specexp.sweep.groups import Group, collect, form_groups, next_group, restart, so_far
from specexp.sweep.job_plan import Job
from specexp.sweep.recorder import SweepRecorder

log = logging.getLogger("specexp")

Outcome = JobReturn | BaseException  # what a group's launch gave: the job's return, or why it has none


@dataclass
class SweepRun:
    """A sweep in progress: what its points returned, and what a sweeper adds to its summary.

    A resumed sweep starts with the results already in its folder (``earlier``) and numbers its new
    points and server groups after them (``next_job``, ``groups``)."""

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
    next_job: int = 0  # the next point's number (its folder)
    groups: int = 0  # the next server group's number (its folder under groups/)
    pending: list[PointResult] = field(default_factory=list)  # back from the launch in progress so far
    recorder: SweepRecorder | None = None
    owner: folder.Owner | None = None  # this process's lock on the folder (a new folder: once it is made)

    def release(self) -> None:
        """The folder free for another process (the sweep has ended, or was refused)."""
        if self.owner is not None:
            self.owner.release()

    def points(self, live: Sequence[PointResult] = ()) -> list[PointResult]:
        """Every point of the sweep, earlier invocations', the launch in progress and ``live`` ones (a
        group's points as they end) included, a failed attempt replaced by a rerun."""
        return folder.current([*self.earlier, *self.results, *self.pending, *live])

    def update(self, live: Sequence[PointResult] = ()) -> None:
        if self.recorder is not None:
            self.recorder.update(self.points(live))


def _resume_command(run: SweepRun) -> str:
    overrides = [a for a in sys.argv[1:] if a not in ("-m", "--multirun") and not a.startswith("resume=")]
    return shlex.join(["python", "-m", "specexp", *overrides, f"resume={run.sweep_id}", "-m"])


def interrupt_line(run: SweepRun) -> str:
    """What an interrupted sweep kept and how to go on, in one line."""
    points = run.points()
    kept = sum(r.ok for r in points)
    return f"interrupted: {kept} of {len(points)} points kept in {run.sweep_dir}; resume with: {_resume_command(run)}"


def cut_short_line(run: SweepRun) -> str | None:
    """The resume line of a sweep that ended with points interrupted under it (a job scancel or a
    time-out stopped, a node lost) though the sweep itself was not: None when none was."""
    cut = sum(r.status == "interrupted" for r in run.points())
    if not cut:
        return None
    return f"{cut} point(s) interrupted (their job ended before they did); resume with: {_resume_command(run)}"


class LaunchingSweeper(Sweeper):
    """Hydra's context, the config and the launcher, and the sweep skeleton both modes share."""

    max_batch_size: int | None = None  # server groups at once under a parallel launcher; None: all

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.task_function = task_function
        self.config = config
        self.launcher = self._instantiate(config)
        self._launchers: dict[tuple[tuple[str, object], ...], Launcher] = {}
        self._devices: list[str] | None = None

    def _instantiate(self, config: DictConfig) -> Launcher:
        return Plugins.instance().instantiate_launcher(
            hydra_context=self.hydra_context, task_function=self.task_function, config=config
        )

    def task_config(self, overrides: Sequence[str]) -> DictConfig:
        """A job's composed config without its ``hydra`` node, as its task sees it."""
        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(cfg):
            del cfg["hydra"]
        return cfg

    def compose(self, overrides: Sequence[str]) -> Config:
        return to_config(self.task_config(overrides))

    def settings(self, overrides: Sequence[str]) -> dict[str, Any]:
        """A job's settings as dotted keys, as its results carry them."""
        return flat_params(self.task_config(overrides))

    @property
    def parallel(self) -> bool:
        """Jobs run elsewhere, side by side (not in this process, one after another)."""
        return not isinstance(self.launcher, BasicLauncher)

    def node_devices(self) -> list[str] | None:
        """GPUs specexp deals out to groups side by side on this node; None where it deals none."""
        if not (self.parallel and resources.same_node(self.config.hydra.launcher)):
            return None
        if self._devices is None:
            self._devices = resources.node_devices()
        return self._devices

    def plan(self, jobs: list[list[str]], sweep_id: str, names: list[str] | None = None) -> list[Job]:
        planned = plan.plan(self.compose, jobs, sweep_id, names, side_by_side=self.parallel)
        if self.parallel:
            resources.check_parallel(plan.by_server(planned), self.node_devices())
        return planned

    def launch(self, run: SweepRun, jobs: list[Job]) -> list[PointResult]:
        """Run planned jobs as server groups, their points numbered after every job the folder holds;
        their results join the sweep's in plan order, and the record follows each group (each point
        under the basic launcher). After an interrupt, so do the points that groups still running
        have finished so far."""
        groups = form_groups(jobs, run.next_job, run.groups)
        run.next_job += len(jobs)
        live.expect(run.next_job)
        run.groups += len(groups)
        done: dict[int, list[PointResult]] = {}

        def in_order() -> list[PointResult]:
            return [r for i in sorted(done) for r in done[i]]

        try:
            for i, outcome in self._dispatch(run, groups):
                if isinstance(outcome, JobReturn):
                    run.returns.append(outcome)
                done[i] = collect(groups[i], run.sweep_dir, outcome, self.settings)
                run.pending = in_order()
                run.update()
        finally:  # an interrupt: what the groups not yet back have left so far (their jobs may go on)
            # part of the record: a second Ctrl-C meanwhile must not lose the points already measured
            with signals.deferred(reraise=sys.exc_info()[1] is None):
                for i, group in enumerate(groups):
                    if i not in done:
                        done[i] = so_far(group, run.sweep_dir, self.settings, "the sweep was interrupted first")
                results = in_order()
                run.results += results
                run.pending = []
        return results

    def launcher_for(self, group: Group) -> Launcher:
        """The launcher for a group's job, from the config as it is now (a resumed sweep's folder), with
        what a scheduler is asked for the group (its name, GPUs, CPUs and memory) where it takes one."""
        fields = resources.launcher_fields(self.config.hydra.launcher, group) if self.parallel else {}
        key = tuple(sorted(fields.items()))
        if key not in self._launchers:
            config = copy.deepcopy(self.config)
            with open_dict(config):
                config.hydra.launcher.update(fields)
            self._launchers[key] = self._instantiate(config)
        return self._launchers[key]

    def _launch_group(self, group: Group, sweep_dir: Path) -> JobReturn:
        group.save(sweep_dir)
        return self.launcher_for(group).launch([group.job_overrides()], initial_job_idx=group.index)[0]

    def _dispatch(self, run: SweepRun, groups: list[Group]) -> Iterator[tuple[int, Outcome]]:
        """Each group's outcome as it ends: one after another in this process, else side by side."""
        for group in groups:
            self.launcher_for(group)  # built here, not in the threads
        if self.parallel:
            yield from self._side_by_side(groups, run.sweep_dir)
            return
        for i, group in enumerate(groups):
            live: list[PointResult] = []

            def point_ended(result: PointResult, live: list[PointResult] = live) -> None:
                live.append(result)
                run.update(live)

            try:
                with runner.reporting(point_ended):
                    outcome: Outcome = self._launch_group(group, run.sweep_dir)
            except Exception as exc:  # the launcher itself failed: this group has no job
                outcome = exc
            yield i, outcome

    def _side_by_side(self, groups: list[Group], sweep_dir: Path) -> Iterator[tuple[int, Outcome]]:
        """Groups started in order, each as soon as a slot (max_batch_size) and its GPUs are free,
        each waited for by a thread of its own."""
        devices = self.node_devices()
        pool = resources.DevicePool(devices) if devices is not None else None
        slots = threading.Semaphore(self.max_batch_size or len(groups))
        ended: queue.Queue[tuple[int, Outcome]] = queue.Queue()

        def wait_for(i: int, group: Group) -> None:
            try:
                for tries in itertools.count():
                    try:
                        outcome: Outcome = self._launch_group(group, sweep_dir)
                    except BaseException as exc:  # a job that failed, was killed or cancelled
                        outcome = exc
                    if not restart(sweep_dir, group.index, outcome, tries):
                        break
                    log.warning(
                        "server group %d: its job failed to start (%s); starting it again", group.index, outcome
                    )
            finally:
                if pool is not None and group.devices is not None:
                    pool.give(group.devices)
                slots.release()
            ended.put((i, outcome))

        def start_in_order() -> None:
            for i, group in enumerate(groups):
                slots.acquire()
                if pool is not None:
                    group.devices = pool.take(group.gpus)
                threading.Thread(target=wait_for, args=(i, group), daemon=True, name=f"group-{group.index}").start()

        threading.Thread(target=start_in_order, daemon=True, name="groups").start()
        for _ in groups:
            yield ended.get()

    def new_run(self) -> SweepRun:
        """The sweep's folder and id: a new one, or (``resume=``, or a folder holding a sweep already)
        the sweep to continue, with its results so far. A folder that exists is owned (locked) before
        anything in it is read; a new one once it is made (``record``)."""
        with invalid_config_exits():
            resume = self.config.get("resume")
            sweep_dir = folder.find(resume, Path(str(self.config.outputs))) if resume else None
            sweep_dir = sweep_dir or Path(self.config.hydra.sweep.dir)
            checks.check_folder_path("hydra.sweep.dir", sweep_dir)
            owner = self.own(sweep_dir) if sweep_dir.is_dir() else None
        record = folder.read_record(sweep_dir)
        for job_dir, why in folder.broken(sweep_dir).items():  # measured again, like an unfinished attempt
            aside = runner.set_aside(job_dir)
            console.print(f"{job_dir / folder.RESULTS} cannot be read ({why}): set aside as {aside}", soft_wrap=True)
        # Job folders go here: every job's config is composed again from the master's hydra overrides.
        quoted = "'" + str(sweep_dir).replace("\\", "\\\\").replace("'", "\\'") + "'"
        with read_write(self.config), open_dict(self.config):
            self.config.hydra.sweep.dir = str(sweep_dir)
            self.config.hydra.overrides.hydra.append(f"hydra.sweep.dir={quoted}")
        run = SweepRun(
            record["sweep_id"] if record else run_id(),
            sweep_dir,
            next_job=folder.next_job(sweep_dir),
            groups=next_group(sweep_dir),
            owner=owner,
        )
        if record is not None:
            run.earlier = list(folder.job_results(sweep_dir).values())
            done = sum(r.ok for r in folder.current(run.earlier))
            which = (
                f" (resume=latest: the newest you started from {self.config.outputs})"
                if resume == folder.LATEST
                else ""
            )
            console.print(
                f"resuming sweep {run.sweep_id} in {sweep_dir}{which}: {done} point(s) finished ok already",
                soft_wrap=True,
            )
        return run

    @staticmethod
    def own(sweep_dir: Path) -> folder.Owner:
        """The folder's lock for this sweep (ConfigError: a live process owns it); a lock a dead
        sweep left is taken over, and said."""
        owner = folder.own(sweep_dir)
        if owner.took_over is not None:
            console.print(
                f"{sweep_dir}: taken over from a sweep that is no longer running ({folder.describe(owner.took_over)})",
                soft_wrap=True,
            )
        return owner

    def _made(self, run: SweepRun) -> None:
        """The sweep's folder made and owned (only now: a refused sweep leaves no folder). A folder
        that was new at ``new_run`` and holds a sweep now was begun meanwhile by another process."""
        with invalid_config_exits():
            try:
                run.sweep_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                fix = "give hydra.sweep.dir a folder you can write to"
                raise ConfigError(
                    "hydra.sweep.dir", f"cannot make {run.sweep_dir}: {exc.filename}: {exc.strerror}", fix
                ) from None
            if run.owner is None:
                run.owner = self.own(run.sweep_dir)
                begun = folder.read_record(run.sweep_dir)
                if begun is not None or folder.next_job(run.sweep_dir) != run.next_job:
                    run.release()
                    raise ConfigError(
                        "hydra.sweep.dir",
                        f"another process began a sweep in {run.sweep_dir} meanwhile",
                        "run again to resume it, or give another hydra.sweep.dir",
                    )

    @staticmethod
    def _end(run: SweepRun, interrupted: bool) -> None:
        """No server left running and the summary written, a second Ctrl-C meanwhile held off."""
        with signals.deferred(reraise=not interrupted):
            servers.stop()
            if run.recorder is not None:
                extra_metrics, extra_files, answer = run.summarize() if run.summarize else ({}, [], [])
                run.recorder.finish(run.points(), interrupted, extra_metrics, extra_files, answer)

    @staticmethod
    def job_arguments(arguments: Sequence[str]) -> list[str]:
        """The command line's overrides for the jobs: ``resume`` belongs to the sweep, not its points."""
        return [a for a in arguments if not a.lstrip("+").startswith("resume=")]

    def remaining(self, run: SweepRun, jobs: list[Job]) -> list[Job]:
        """The planned jobs whose point has not finished ok in this sweep yet (all, for a new sweep)."""
        done = {folder.point_key(r.params) for r in run.earlier if r.ok}
        if not done:
            return jobs
        return [job for job in jobs if folder.point_key(self.settings(job.overrides)) not in done]

    def checked_plan(self, jobs: list[list[str]], sweep_id: str) -> list[Job]:
        """``plan``, with an invalid job ending the sweep before any server starts (exit 2)."""
        with invalid_config_exits():
            return self.plan(jobs, sweep_id)

    def record(self, run: SweepRun, first: Config, body: Callable[[SweepRun], None]) -> None:
        """Run ``body`` as the sweep, with a parent run (tracking checked first, before any server
        starts) and, whatever way it ends (done, failed, interrupted), no server left running and the
        summary written; the folder owned by this process throughout."""
        try:
            self._made(run)
            self._record(run, first, body)
        finally:
            run.release()

    def _record(self, run: SweepRun, first: Config, body: Callable[[SweepRun], None]) -> None:
        multirun = run.sweep_dir / "multirun.yaml"
        if not multirun.exists():  # a resumed sweep keeps the record of how it started
            try:
                atomic.write_text(multirun, redaction.scrub(OmegaConf.to_yaml(self.config)))
            except OSError as exc:  # nothing started yet: nothing to record
                console.print(f"[red]cannot write the sweep's folder[/red]: {atomic.reason(exc)}", soft_wrap=True)
                raise SystemExit(1) from None
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
            if run.earlier:  # a resumed sweep: uploads an interrupt cut short are completed
                run.earlier = run.recorder.completed()
        try:
            body(run)
        except KeyboardInterrupt:
            self._end(run, interrupted=True)
            raise signals.Interrupted(interrupt_line(run)) from None
        except BaseException:
            self._end(run, interrupted=True)
            raise
        self._end(run, interrupted=False)
        if line := cut_short_line(run):
            console.print(line, soft_wrap=True)
        if run.recorder is not None and run.recorder.disk_error is not None:  # said by finish
            raise SystemExit(tracking.TRACKING_FAILED if run.recorder.untracked else 1)
