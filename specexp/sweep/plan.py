"""Planning a sweep: every job composed and validated up front, ordered by server, sized to its server.

Hydra varies the last override fastest, so ``batch=1,4 drafter=none,tiny`` alternates drafters and
would relaunch the server for every job. Every job's config is composed and validated first (so
bad input fails before any server starts), grouped by its server key in order of first appearance,
and told the largest concurrency of its group (``max_batch``: the largest batch, or an open loop's
largest ``load.max_concurrency``) so that one server admits them all. An uncapped open loop adds
nothing: its server is sized by engine.max_running_requests.

With ``repeats > 1`` the server groups run in rounds, A B A B ..., each round a fresh launch of
every server, so slow drift of the machine hits every arm alike; each job is told its round
(``repeat``), and the order is the jobs' order (summary.csv lists them so).

Each run of jobs on one server launch is a server group: the unit a launcher runs as one job
(specexp.sweep.groups).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from specexp import checks
from specexp.config import Config
from specexp.point import check_files, describe, preflight, prepare
from specexp.sweep.names import axes, override, point_names


@dataclass
class Job:
    overrides: list[str]
    cfg: Config
    group: str  # its server launch: the server key (and the round, when the point is repeated)
    name: str  # its run's name in MLflow


def _named(job: Job, launch: int) -> list[str]:
    """The job's overrides and its run's name (with the launch, when the point is repeated)."""
    name = f"{job.name} launch {launch + 1}" if job.name and job.cfg.repeats > 1 else job.name
    return [*job.overrides, override("run_name", name)] if name else job.overrides


def group_key(cfg: Config, global_max: int | None) -> str:
    """The server key with the capacity fixed, so jobs differing only in load group together."""
    return describe(replace(cfg, max_batch=_largest(global_max, cfg.concurrency))).key


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
    compose: Callable[[list[str]], Config], jobs: list[list[str]], sweep_id: str, names: list[str] | None = None
) -> list[Job]:
    """Jobs ordered by server (in rounds, with repeats), each with ``sweep_id``, its server's
    ``max_batch``, its run's name (``names``; default: the overrides that vary between jobs) and its
    round (``repeat``, from the second on) appended. Before anything starts, every job's files are
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
            preflight(replace(first.cfg, max_batch=group_max[group]))
    for cfg in composed:  # every job's files (each dataset read once), a dry run's too
        check_files(cfg)
    if not dry_run:
        for first in groups.values():
            if describe(first.cfg).command is not None:
                checks.check_port(first.cfg)
    sized = {g: [] if m is None else [f"max_batch={m}"] for g, m in group_max.items()}
    return [
        replace(
            j,
            overrides=[*_named(j, r), f"sweep_id={sweep_id}", *sized[j.group], *([f"repeat={r}"] if r else [])],
            group=f"{j.group}/launch{r}" if j.cfg.repeats > 1 else j.group,
        )
        for j, r in interleave(planned)
    ]


def by_server(jobs: Sequence[Job]) -> list[list[Job]]:
    """Planned jobs cut into server groups: each run of consecutive jobs on one server launch."""
    groups: list[list[Job]] = []
    for job in jobs:
        if groups and groups[-1][0].group == job.group:
            groups[-1].append(job)
        else:
            groups.append([job])
    return groups
