"""A sweep's folder: its record (sweep.json: id, parent run, tracking), its numbered job folders, and
what resuming it means.

A folder belongs to one sweep for good. Running into a folder that holds a sweep (``resume=<sweep
id | latest>``, or the same ``hydra.sweep.dir`` again) continues that sweep: same id, same parent
run, new jobs numbered after the existing ones, so no job's results are ever written over. A grid
then skips every point that finished ok, matched by its whole configuration, and reruns the rest.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specexp import atomic
from specexp.config import ConfigError
from specexp.result import PointResult

RECORD = "sweep.json"
RESULTS = "results.json"
LATEST = "latest"
# Settings that say where and how a point was recorded, not what was measured.
_BOOKKEEPING = ("sweep_id", "resume", "run_name", "outputs", "dry_run")


def read_record(folder: Path) -> dict[str, Any] | None:
    path = folder / RECORD
    return json.loads(path.read_text()) if path.is_file() else None


def write_record(folder: Path, record: dict[str, Any]) -> None:
    atomic.write_text(folder / RECORD, json.dumps(record, indent=2))


def find(resume: str, outputs: Path) -> Path:
    """The folder of the sweep to resume: ``latest`` (the newest under <outputs>/multirun) or an id."""
    root = outputs / "multirun"
    records = [(p.parent, read_record(p.parent)) for p in root.glob(f"*/{RECORD}")] if root.is_dir() else []
    if resume == LATEST:
        if not records:
            raise ConfigError("resume", f"no sweep under {root}", "run a sweep first, or give a sweep folder's id")
        return max(records, key=lambda fr: fr[1].get("started", ""))[0]
    for folder, record in records:
        if resume in (record.get("sweep_id"), folder.name):
            return folder
    raise ConfigError("resume", f"no sweep {resume!r} under {root}", f"use a folder name from {root}, or latest")


def job_results(folder: Path) -> dict[int, PointResult]:
    """The results on disk that can be read, by job number (see ``broken``)."""
    found = {}
    for path in folder.glob(f"*/{RESULTS}"):
        if path.parent.name.isdigit():
            with contextlib.suppress(*UNREADABLE):
                found[int(path.parent.name)] = read_result(path)
    return dict(sorted(found.items()))


UNREADABLE = (OSError, ValueError, TypeError, KeyError, AttributeError)


def read_result(path: Path) -> PointResult:
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not a point's results")
    return PointResult.from_json(data)


def broken(folder: Path) -> dict[Path, str]:
    """The job folders whose results.json cannot be read (cut short, edited, not a point's), and why."""
    found = {}
    for path in sorted(folder.glob(f"*/{RESULTS}")):
        if path.parent.name.isdigit():
            try:
                read_result(path)
            except UNREADABLE as exc:
                found[path.parent] = f"{type(exc).__name__}: {exc}"
    return found


def next_job(folder: Path) -> int:
    """The first job number no folder uses yet."""
    numbers = [int(p.name) for p in folder.iterdir() if p.is_dir() and p.name.isdigit()] if folder.is_dir() else []
    return max(numbers, default=-1) + 1


def point_key(params: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """A point's whole configuration, bookkeeping aside: equal for two attempts at the same point."""
    return tuple(
        sorted((k, str(v)) for k, v in params.items() if k not in _BOOKKEEPING and not k.startswith("tracking."))
    )


def current(results: Sequence[PointResult]) -> list[PointResult]:
    """The sweep's points: every result, except a failed or interrupted attempt that a later attempt
    at the same point replaced (results in job order)."""
    last = {point_key(r.params): i for i, r in enumerate(results)}
    return [r for i, r in enumerate(results) if r.ok or last[point_key(r.params)] == i]
