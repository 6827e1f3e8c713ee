"""The grid: Hydra's basic-sweeper expansion of ``params`` and command-line sweeps, run in server order."""

from __future__ import annotations

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from specexp.console import invalid_config_exits
from specexp.report import schedule
from specexp.sweep.baselines import with_baselines
from specexp.sweep.groups import refused_before_anything
from specexp.sweep.names import sweep_name, sweep_params, swept
from specexp.sweep.skeleton import LaunchingSweeper, SweepRun
from specexp.tracking import TRACKING_FAILED


class SweepFailed(SystemExit):
    """Raised after a grid sweep in which some point failed: the exit code says so."""


def expand(sweeper: LaunchingSweeper, params: dict[str, str], arguments: list[str]) -> list[list[str]]:
    """Every job's overrides, as Hydra's basic sweeper would list them."""
    texts = [f"{k}={v}" for k, v in params.items()] + list(arguments)
    overrides = OverridesParser.create(config_loader=sweeper.hydra_context.config_loader).parse_overrides(texts)
    return [job for chunk in BasicSweeper.split_arguments(overrides, None) for job in chunk]


def run_grid(sweeper: LaunchingSweeper, params: dict[str, str], arguments: list[str]) -> SweepRun:
    """Plan, skip what a resumed sweep finished already, launch as server groups, record; SweepFailed
    when a point failed (1), the scheduler refused every job (2) or a point did not reach MLflow (3)."""
    run = sweeper.new_run()
    try:
        with invalid_config_exits():
            wanted = with_baselines(sweeper, expand(sweeper, params, sweeper.job_arguments(arguments)))
            planned = sweeper.plan(wanted, run.sweep_id)
    except BaseException:  # refused: the folder is free again at once
        run.release()
        raise
    jobs = sweeper.remaining(run, planned)
    first, what = sweeper.compose(planned[0].overrides), swept(wanted)
    run.name, run.params = sweep_name(first, what), sweep_params(first, what)
    if "batch" in what and what.keys() & {"drafter.num_steps", "drafter.fixed_depth"}:  # depth x batch: a schedule
        run.summarize = lambda: schedule.add_to(({}, [], []), run.points(), run.sweep_dir)
        run.settings = [k for k in ("drafter.fixed_depth",) if k in what]  # validate_schedule: which arm
    elif what.keys() & {"drafter.synthetic_acceptance_length", "drafter.synthetic_acceptance_rates"}:
        from specexp.report import required  # matplotlib: only for a required-acceptance map

        run.summarize = lambda: required.add_to(({}, [], []), run.points(), run.sweep_dir)
    sweeper.record(run, first, lambda run: sweeper.launch(run, jobs))
    if refused_before_anything(run.points()):  # said as each group was refused: the request is wrong
        raise SweepFailed(2)
    if any(r.status not in ("ok", "dry_run") for r in run.points()):
        raise SweepFailed(1)
    if run.recorder is not None and run.recorder.untracked:
        raise SweepFailed(TRACKING_FAILED)
    return run
