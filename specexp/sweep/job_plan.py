"""Planning a sweep: every job composed and validated up front, ordered by server, sized to its server.

Hydra varies the last override fastest, so ``batch=1,4 drafter=none,tiny`` alternates drafters and
would relaunch the server for every job. Every job's config is composed and validated first (so
bad input fails before any server starts), grouped by its server key in order of first appearance,
and told the largest concurrency of its group (``max_batch``: the largest batch, or an open loop's
largest ``load.max_concurrency``) so that one server admits them all. What the sweep decides for a
job (its sweep id, run name, round, ``max_batch``) goes to it as overrides of the ``run`` node, which
the job reads into its RunContext (specexp.context), never into the user's config. An uncapped open loop adds
nothing: its server is sized by engine.max_running_requests.

With ``repeats > 1`` the server groups run in rounds, A B A B ..., each round a fresh launch of
every server, so slow drift of the machine hits every arm alike; each job is told its round
(``repeat``), and the order is the jobs' order (summary.csv lists them so).

Each run of jobs on one server launch is a server group: the unit a launcher runs as one job
(specexp.sweep.groups). Where the servers take no GPU (``arms``), a round's servers run together in
one group instead, all up at once, their points taking turns at each load.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from specexp import checks, redaction
from specexp.config import Config
from specexp.context import RUN_NODE, RunContext
from specexp.point.plan import check_files, describe, design_lines, preflight, prepare
from specexp.sweep.names import axes, override, point_names

log = logging.getLogger("specexp")

MAX_AUTO_ARMS = 4  # servers arms=auto keeps up at once: each holds its model in memory


@dataclass
class Job:
    overrides: list[str]
    cfg: Config
    group: str  # its server launch: the server key (and the round, when the point is repeated)
    name: str  # its run's name in MLflow
    # the launcher job it runs in (a server group): its server launch, or its round's servers
    # together when their arms take turns (take_turns)
    unit: str = ""
    turn: int | None = None  # arms taking turns: its load's position, shared with the other arms' points


def decided(key: str, value: str | int) -> str:
    """The override that hands a job one of the sweep's decisions (RunContext's ``key``): a number as
    it is, text quoted (a run's name holds spaces and ``=``)."""
    path = f"++{RUN_NODE}.{key}"
    return f"{path}={value}" if isinstance(value, int) else override(path, value)


def _named(job: Job, launch: int) -> list[str]:
    """The job's overrides and its run's name (with the launch, when the point is repeated)."""
    name = f"{job.name} launch {launch + 1}" if job.name and job.cfg.repeats > 1 else job.name
    return [*job.overrides, decided("run_name", name)] if name else job.overrides


def group_key(cfg: Config, global_max: int | None) -> str:
    """The server key with the capacity fixed, so jobs differing only in load group together; with
    the GPU type a scheduler is asked for (engine.gpu_type, in no argv), so two types never share a job."""
    key = describe(cfg, RunContext(max_batch=_largest(global_max, cfg.concurrency))).key
    return key if cfg.engine.gpu_type is None else f"{key}@{cfg.engine.gpu_type}"


def _largest(*sizes: int | None) -> int | None:
    return max((s for s in sizes if s is not None), default=None)


def order_by_server(jobs: Sequence[Job]) -> list[Job]:
    """Jobs grouped by server in order of first appearance; the command line's order within a server."""
    first = {}
    for i, job in enumerate(jobs):
        first.setdefault(job.group, i)
    return sorted(jobs, key=lambda j: first[j.group])


def interleave(jobs: Sequence[Job]) -> list[tuple[Job, int]]:
    """Jobs already grouped by server, in rounds of launches: (job, round) for round 0 of every
    group, then round 1 of every group, ... up to each job's ``repeats``."""
    rounds = max(j.cfg.repeats for j in jobs)
    return [(j, r) for r in range(rounds) for j in jobs if r < j.cfg.repeats]


def plan(
    compose: Callable[[list[str]], Config],
    jobs: list[list[str]],
    sweep_id: str,
    names: list[str] | None = None,
    side_by_side: bool = False,
) -> list[Job]:
    """Jobs ordered by server (in rounds, with repeats), each with ``sweep_id``, its server's
    ``max_batch``, its run's name (``names``; default: the overrides that vary between jobs) and its
    round (``repeat``, from the second on) appended; arms take turns unless groups run
    ``side_by_side`` (a parallel launcher) and none asks to. Before anything starts, every job's files are
    checked (its dataset read), and once per server its fixed port and its argv (the engine's own
    parser): ConfigError on a bad file or a refusal."""
    composed = [compose(o) for o in jobs]
    for cfg in composed:
        prepare(cfg)
    global_max = _largest(*(c.concurrency for c in composed))
    names = names or point_names(jobs, axes(jobs))
    planned = order_by_server(
        [Job(o, c, group_key(c, global_max), n) for o, c, n in zip(jobs, composed, names, strict=True)]
    )
    group_max: dict[str, int | None] = {}
    for j in planned:
        group_max[j.group] = _largest(group_max.get(j.group), j.cfg.concurrency)
    dry_run = planned[0].cfg.dry_run
    groups = {j.group: j for j in reversed(planned)}
    if not dry_run:
        for group, first in groups.items():  # the engine first: a missing one says so before any path
            preflight(first.cfg, RunContext.of(first.cfg, {"max_batch": group_max[group]}))
    for cfg in composed:  # every job's files (each dataset read once), a dry run's too
        check_files(cfg, RunContext.of(cfg))
    if not dry_run:
        for first in groups.values():
            if describe(first.cfg, RunContext()).command is not None:
                checks.check_port(first.cfg)
    sized = {g: [] if m is None else [decided("max_batch", m)] for g, m in group_max.items()}
    if dry_run:
        print(dry_run_plan(planned, group_max), flush=True)
    return take_turns(
        [
            (
                replace(
                    j,
                    overrides=[*_named(j, r), decided("sweep_id", sweep_id), *sized[j.group], *round_of(r)],
                    group=f"{j.group}/launch{r}" if j.cfg.repeats > 1 else j.group,
                ),
                r,
            )
            for j, r in interleave(planned)
        ],
        side_by_side,
    )


def round_of(launch: int) -> list[str]:
    """The override that tells a job its round of a repeated point (none for the first)."""
    return [decided("repeat", launch)] if launch else []


def alternate(arms: Sequence[Sequence[Job]], side_by_side: bool) -> bool:
    """Whether a round's servers take turns: all asked to (``arms=alternate``), or, under ``auto``,
    where they can share the machine (no GPU, no fixed port, at most MAX_AUTO_ARMS of them) and
    would otherwise run one after another (not ``side_by_side``)."""
    jobs = [j for arm in arms for j in arm]
    if len(arms) < 2 or any(j.cfg.arms == "sequential" for j in jobs):
        return False
    if all(j.cfg.arms == "alternate" for j in jobs):
        return True
    fits = len(arms) <= MAX_AUTO_ARMS and all(j.cfg.gpus == 0 and j.cfg.engine.port is None for j in jobs)
    return fits and not side_by_side


def take_turns(jobs: Sequence[tuple[Job, int]], side_by_side: bool = False) -> list[Job]:
    """Each round's jobs as launcher units. Where a round's servers take turns (``alternate``), one
    unit whose arms' points at each load are measured side by side, windows alternating (A1 B1 A1
    B1 …, then batch 4): the machine's drift between two arms is one window long, not half the
    sweep (specexp.sweep.turns). Else one unit per server launch, A1 A4 B1 B4."""
    units: list[Job] = []
    for r, members in itertools.groupby(jobs, key=lambda job_round: job_round[1]):
        round_jobs = [j for j, _ in members]
        arms = _runs(round_jobs, lambda j: j.group)
        turns = alternate(arms, side_by_side)
        if r == 0 and len(arms) > 1:
            log.info(
                "arms: %d servers %s",
                len(arms),
                "up at once, taking turns at each load" if turns else "one at a time (arms=alternate: all at once)",
            )
        if turns:
            unit = "+".join(arm[0].group for arm in arms)
            units += [
                replace(j, unit=unit, turn=t)
                for t, turn in enumerate(itertools.zip_longest(*arms))
                for j in turn
                if j is not None
            ]
        else:
            units += [replace(j, unit=j.group) for j in round_jobs]
    return units


def _runs(jobs: Sequence[Job], key: Callable[[Job], str]) -> list[list[Job]]:
    """Jobs cut where ``key`` changes."""
    return [list(run) for _, run in itertools.groupby(jobs, key=key)]


def by_server(jobs: Sequence[Job]) -> list[list[Job]]:
    """Planned jobs cut into server groups: each run of consecutive jobs in one launcher unit (one
    server launch, or a round's servers taking turns)."""
    return _runs(jobs, lambda j: j.unit)


PLACEHOLDER = "/path/to/"  # what a preset's default checkpoint path holds until it is set


def placeholders(cfg: Config) -> list[str]:
    """``key=value`` for each setting that still holds a placeholder path (``/path/to/...``)."""
    found: list[str] = []

    def walk(node: object, prefix: str) -> None:
        if dataclasses.is_dataclass(node):
            for f in dataclasses.fields(node):
                walk(getattr(node, f.name), f"{prefix}{f.name}.")
        elif isinstance(node, str) and PLACEHOLDER in node:
            found.append(f"{prefix[:-1]}={node}")

    walk(cfg, "")
    return found


def dry_run_plan(planned: Sequence[Job], group_max: dict[str, int | None]) -> str:
    """A dry run's whole plan, compact: what its design detects (specexp.point.plan.design_lines),
    each server once (its argv and environment, secrets masked), the points it would measure, and a
    warning for each placeholder path left unset."""
    servers = _runs(planned, lambda j: j.group)
    lines = [f"dry run: {len(planned)} points on {len(servers)} server(s); nothing is started"]
    lines += design_lines(j.cfg for j in planned)
    warned: set[str] = set()
    for n, jobs in enumerate(servers, 1):
        first = jobs[0].cfg
        command = describe(first, RunContext(max_batch=group_max.get(jobs[0].group))).command
        names = ", ".join(j.name or f"batch={j.cfg.batch}" for j in jobs)
        lines.append(f"server {n} ({jobs[0].group}): {len(jobs)} point(s): {names}")
        if command is None:
            lines.append(f"  endpoint: {first.engine.url} (not launched by specexp)")
        else:
            lines.append("  argv: " + shlex.join(redaction.scrub_data(command.argv)))
            if command.env:
                lines.append("  env: " + " ".join(f"{k}={v}" for k, v in redaction.scrub_data(command.env).items()))
        for found in placeholders(first):
            if found not in warned:
                warned.add(found)
                lines.append(f"  warning: {found} is a placeholder: set it (or its preset's variable) for a real run")
    return "\n".join(lines)
