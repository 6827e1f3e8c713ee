"""A sweep's folder: its record (sweep.json: id, parent run, tracking), its numbered job folders, and
what resuming it means.

A folder belongs to one sweep for good. Running into a folder that holds a sweep (``resume=<sweep
id | latest>``, or the same ``hydra.sweep.dir`` again) continues that sweep: same id, same parent
run, new jobs numbered after the existing ones, so no job's results are ever written over. A grid
then skips every point that finished ok, matched by its whole configuration, and reruns the rest.

A folder has one live owner at a time: the sweep's own process holds an advisory lock (flock) on
``sweep.lock``, which names it (host, pid, start). The kernel drops the lock when that process dies,
so a lock that can be taken while the file still names someone is one a dead sweep left: taken over.
Group jobs never take it: they run inside the owner's sweep, in whatever process the launcher chose.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from specexp import atomic
from specexp.config import ConfigError
from specexp.result import PointResult

RECORD = "sweep.json"
RESULTS = "results.json"
LATEST = "latest"
LOCK = "sweep.lock"
# Settings that say where and how a point was recorded, not what was measured.
_BOOKKEEPING = ("sweep_id", "resume", "run_name", "outputs", "dry_run")


def read_record(folder: Path) -> dict[str, Any] | None:
    path = folder / RECORD
    return json.loads(path.read_text()) if path.is_file() else None


def write_record(folder: Path, record: dict[str, Any]) -> None:
    atomic.write_text(folder / RECORD, json.dumps(record, indent=2))


def find(resume: str, outputs: Path) -> Path:
    """The folder of the sweep to resume: ``latest`` (the newest under <outputs>/multirun that this
    user started from this outputs folder) or an id."""
    root = outputs / "multirun"
    records = [(p.parent, read_record(p.parent)) for p in root.glob(f"*/{RECORD}")] if root.is_dir() else []
    if resume == LATEST:
        ours = [(f, r) for f, r in records if r is not None and mine(f, r, outputs)]
        if not ours:
            skipped = f" ({len(records)} of other users or outputs folders skipped)" if records else ""
            raise ConfigError(
                "resume", f"no sweep of yours under {root}{skipped}", "run a sweep first, or give a sweep folder's id"
            )
        return max(ours, key=lambda fr: fr[1].get("started", ""))[0]
    for folder, record in records:
        if record is not None and resume in (record.get("sweep_id"), folder.name):
            return folder
    raise ConfigError("resume", f"no sweep {resume!r} under {root}", f"use a folder name from {root}, or latest")


def mine(folder: Path, record: dict[str, Any], outputs: Path) -> bool:
    """A sweep this user started from ``outputs``: its record is this user's file and names ``outputs``
    (a shared outputs folder holds other users' sweeps, and a copied folder names where it came from)."""
    try:
        uid = (folder / RECORD).stat().st_uid
    except OSError:
        return False
    named = record.get("outputs")
    return uid == os.getuid() and named is not None and Path(named).resolve() == outputs.resolve()


@dataclass
class Owner:
    """This process's hold on a sweep folder; ``took_over``: who a dead sweep's lock named, if one did."""

    folder: Path
    took_over: dict[str, Any] | None = None
    # a refused or crashed sweep in this process frees the folder too: at collection or at exit
    _let_go: weakref.finalize | None = field(default=None, repr=False)

    def release(self) -> None:
        """The folder free again, its lock file emptied (a clean end, not a dead owner); once."""
        if self._let_go is not None:
            self._let_go()


def _let_go(file: IO[str], pid: int) -> None:
    if os.getpid() == pid:  # a forked child's copy must not blank its parent's lock
        with contextlib.suppress(OSError, ValueError):
            file.truncate(0)
            file.flush()
    file.close()  # and with it the flock, once no copy of this descriptor is left


def describe(holder: dict[str, Any]) -> str:
    """Who a lock names, in words."""
    return f"host {holder.get('host', '?')}, pid {holder.get('pid', '?')}, since {holder.get('started', '?')}"


def own(sweep_dir: Path, key: str = "hydra.sweep.dir") -> Owner:
    """The sweep folder's lock, for as long as this process runs its sweep; ConfigError when a live
    process owns it, or when its lock file cannot be made."""
    path = sweep_dir / LOCK
    try:
        file = path.open("a+")  # made if absent, never emptied before it is held
    except OSError as exc:
        raise ConfigError(key, f"cannot make {path}: {exc.strerror}", f"give {key} a folder you can write to") from None
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(file)
        file.close()
        raise ConfigError(
            key,
            f"{sweep_dir} belongs to a sweep running now ({describe(holder)})",
            f"give another {key}, or wait until pid {holder.get('pid', '?')} on {holder.get('host', '?')} ends",
        ) from None
    owner = Owner(sweep_dir, _holder(file) or None)
    file.seek(0)
    file.truncate()
    file.write(
        json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "started": time.strftime("%Y-%m-%dT%H:%M:%S")})
    )
    file.flush()
    owner._let_go = weakref.finalize(owner, _let_go, file, os.getpid())
    return owner


def _holder(file: IO[str]) -> dict[str, Any]:
    """What a lock file says of its owner: {} when empty (released cleanly), a pid of ``?`` when it
    cannot be read."""
    file.seek(0)
    with contextlib.suppress(ValueError):
        data = json.loads(file.read() or "{}")
        return data if isinstance(data, dict) else {"pid": "?"}
    return {"pid": "?"}


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
