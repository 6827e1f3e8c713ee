"""A server group: the points of one server launch, run in order by one launcher job.

The sweeper writes each group's manifest (``<sweep>/groups/<index>/group.json``, also the group job's
Hydra folder) before launching it; the job (specexp.sweep.runner) reads it and measures the points
into ``<sweep>/<num>/``, their numbers in the sweep, so a sweep folder looks the same whatever the
launcher. What comes back is each point's result: from the job's return, else from its folder; a
point the job never finished is recorded as interrupted (in the summary; a resume measures it).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

from specexp import redaction
from specexp.context import RUN_NODE
from specexp.result import PointResult
from specexp.sweep.folder import RESULTS
from specexp.sweep.job_plan import Job, by_server

log = logging.getLogger("specexp")

MANIFEST = "group.json"
ATTEMPTS = "attempts.jsonl"  # each run of the group's job: where, when, how it ended (specexp.sweep.runner)


@dataclass
class Point:
    num: int  # its number in the sweep: its folder <sweep>/<num> and its prompt stream
    overrides: list[str]
    # arms taking turns: the points with the same turn are measured side by side, windows alternating
    turn: int | None = None


@dataclass
class Group:
    index: int  # the group's launcher job number (hydra.job.num), its folder <sweep>/groups/<index>
    key: str  # the server key its points share
    gpus: int  # GPUs its server takes (its servers share, when arms take turns)
    points: list[Point] = field(default_factory=list)
    servers: int = 1  # servers up at once: its arms, when they take turns (specexp.sweep.job_plan.take_turns)
    # CUDA_VISIBLE_DEVICES for its server, dealt by the sweeper when groups share this node; None: the
    # job's own (a scheduler's allocation, or the whole node when groups run one at a time)
    devices: list[str] | None = None
    gpu_type: str | None = None  # engine.gpu_type: what a scheduler is asked for (specexp.sweep.resources)
    sweep_id: str = ""  # its sweep's: a scheduler's job name carries it

    @staticmethod
    def folder(sweep_dir: Path, index: int) -> Path:
        return sweep_dir / "groups" / str(index)

    def job_overrides(self) -> list[str]:
        """The launcher job: composed as the group's first point, in the group's own folder."""
        return [*self.points[0].overrides, f"hydra.sweep.subdir=groups/{self.index}"]

    def save(self, sweep_dir: Path) -> None:
        """The manifest, secret values masked (``+engine.env.HF_TOKEN=***``): the job takes them from
        its own overrides, which the launcher hands it (specexp.sweep.runner.unmasked)."""
        folder = self.folder(sweep_dir, self.index)
        folder.mkdir(parents=True, exist_ok=True)
        data = asdict(self)
        for p in data["points"]:
            p["overrides"] = [redaction.mask_override(o) for o in p["overrides"]]
        (folder / MANIFEST).write_text(json.dumps(data, indent=2))

    @classmethod
    def load(cls, job_dir: Path) -> Group:
        data = json.loads((job_dir / MANIFEST).read_text())
        return cls(**{**data, "points": [Point(**p) for p in data["points"]]})


def started(sweep_dir: Path, index: int) -> bool:
    """Whether the group's job ever began (it logs a start in attempts.jsonl, specexp.sweep.runner)."""
    attempts = Group.folder(sweep_dir, index) / ATTEMPTS
    try:
        return any(json.loads(line).get("event") == "start" for line in attempts.read_text().splitlines() if line)
    except (OSError, ValueError):
        return False


START_RETRIES = 1  # a launcher's job that failed before it began is started again this many times


def restart(sweep_dir: Path, index: int, outcome: object, tries: int) -> bool:
    """Start a group's job again: it failed to start (the launcher raised or reported it failed, e.g.
    submitit's local controller missing its own log file, and the job never logged a start), and it
    has retries left. A job that began and then failed, or an interrupt, is not retried: its points
    are recorded as they ended."""
    failed = isinstance(outcome, Exception) or (
        isinstance(outcome, JobReturn) and outcome.status != JobStatus.COMPLETED
    )
    return failed and tries < START_RETRIES and not started(sweep_dir, index) and refusal(outcome) is None


SUBMITTERS = ("sbatch",)  # a scheduler's submission command: its refusal is final (the request is wrong)


def refusal(outcome: object) -> str | None:
    """The scheduler's own words when it refused the group's job at submission (``sbatch: error:
    ... Invalid generic resource (gres) specification``), so nothing of it ran and a retry or a resume
    would be refused again; None for any other outcome. submitit raises the submission command's
    stderr, caused by its CalledProcessError."""
    cause = getattr(outcome, "__cause__", None)
    if not isinstance(outcome, Exception) or not isinstance(cause, subprocess.CalledProcessError):
        return None
    argv = cause.cmd if isinstance(cause.cmd, list | tuple) else str(cause.cmd).split()
    if not argv or Path(str(argv[0])).name not in SUBMITTERS:
        return None
    said = [line.strip() for line in str(cause.stderr or outcome).splitlines() if line.strip()]
    return said[-1] if said else f"{Path(str(argv[0])).name} exited with code {cause.returncode}"


def next_group(sweep_dir: Path) -> int:
    """The first group number no folder under ``groups/`` uses yet (a resumed sweep goes on from it)."""
    root = sweep_dir / "groups"
    numbers = [int(p.name) for p in root.iterdir() if p.name.isdigit()] if root.is_dir() else []
    return max(numbers, default=-1) + 1


SWEEP_ID = f"++{RUN_NODE}.sweep_id="  # the planner's override (specexp.sweep.job_plan.decided)


def form_groups(jobs: Sequence[Job], first_point: int, first_group: int) -> list[Group]:
    """Planned jobs as numbered server groups, points numbered on from ``first_point``."""
    groups, num = [], first_point
    for index, members in enumerate(by_server(jobs), start=first_group):
        arms = len({job.group for job in members})
        gpus, gpu_type = max(job.cfg.gpus for job in members), members[0].cfg.engine.gpu_type
        ids = (o.removeprefix(SWEEP_ID).strip("'") for o in members[0].overrides if o.startswith(SWEEP_ID))
        sweep_id = next(ids, "")
        group = Group(index, members[0].unit, gpus, servers=arms, gpu_type=gpu_type, sweep_id=sweep_id)
        for job in members:
            group.points.append(Point(num, job.overrides, job.turn))
            num += 1
        groups.append(group)
    return groups


def saved_result(folder: Path) -> PointResult | None:
    try:
        return PointResult.from_json(json.loads((folder / RESULTS).read_text()))
    except (OSError, ValueError, TypeError):
        return None


Settings = Callable[[list[str]], dict[str, Any]]  # a point's settings as dotted keys, from its overrides


def so_far(group: Group, sweep_dir: Path, settings: Settings, error: str) -> list[PointResult]:
    """Each point's saved result, or, for a point that left none, an interrupted one saying ``error``
    (for the summary; a resume measures it again)."""
    return [
        saved_result(sweep_dir / str(p.num))
        or PointResult.from_params("interrupted", settings(p.overrides), error=error)
        for p in group.points
    ]


def collect(group: Group, sweep_dir: Path, outcome: JobReturn | BaseException, settings: Settings) -> list[PointResult]:
    """The group's results in point order. A job the scheduler refused fails its points with the
    scheduler's words (a resume cannot help). A job that ended early (failed, killed, pre-empted and
    not requeued) leaves its finished points on disk; every other point is recorded as interrupted,
    with why and its settings."""
    if isinstance(outcome, JobReturn) and outcome.status == JobStatus.COMPLETED:
        results = [PointResult.from_json(r) for r in outcome.return_value]
    elif (refused := refusal(outcome)) is not None:
        log.error("server group %d: the scheduler refused its job: %s; its points failed", group.index, refused)
        error = f"{REFUSED} server group {group.index}'s job: {refused}"
        results = [PointResult.from_params("failed", settings(p.overrides), error=error) for p in group.points]
    else:
        cause = ended_by(outcome._return_value if isinstance(outcome, JobReturn) else outcome)
        log.error(
            "server group %d: its job ended early (%s); unfinished points are recorded as interrupted",
            group.index,
            cause,
        )
        error = f"the job of server group {group.index} ended before this point did ({cause})"
        results = so_far(group, sweep_dir, settings, error)
    return results


def ended_by(why: object) -> str:
    """Why a job ended early, in one line: the first of its error, and the scheduler's state for the
    job where submitit names it on a later line (``has not produced any output (state: CANCELLED by
    1000)``: scancel, a time limit, a node lost)."""
    text = str(why)
    first = (text.splitlines() or [""])[0]
    state = re.search(r"\(state: [^)]*\)", text)
    return f"{type(why).__name__}: {first}" + (f" {state[0]}" if state and state[0] not in first else "")


REFUSED = "the scheduler refused"  # how a refused group's points' errors begin


def refused_before_anything(points: Sequence[PointResult]) -> bool:
    """Every point of a sweep failed because the scheduler refused its group's job: nothing ran, so
    the request, not a measurement, is wrong (the sweep exits 2, as for any bad input)."""
    return bool(points) and all(p.status == "failed" and (p.error or "").startswith(REFUSED) for p in points)
