"""The watchdog over a point's server: a load or a counters read is watched, and the engine's death
(ServerExited) or stall (EngineStalled: its process group killed if specexp launched it) ends it with
the evidence (exit code or process state, the log's tail), instead of records that only say
"connection error"."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

from specexp import redaction, servers
from specexp.load import progress
from specexp.processes import log_tail, process_state


class ServerLost(RuntimeError):
    """The server a point was using is gone or cannot be trusted: its records so far are partial."""


class ServerExited(ServerLost):
    """The launched server's process ended while a point was using it."""


class EngineStalled(ServerLost):
    """Requests waited on the server and nothing came back for engine.stall_s: it was killed."""


T = TypeVar("T")

# How long a refused or reset connection waits for the server's process to be seen ending, before
# it counts as the requests' own failure: the client can see the socket close first.
EXIT_GRACE_S = 3.0


async def watched(
    work: Awaitable[T], srv: servers.Server, phase: str, stall_s: float | None = None, one_request: bool = False
) -> T:
    """``work``, unless the server process exits first (ServerExited, naming the exit code, ``phase``
    and the log's tail: what the records would otherwise hide as connection errors), or requests
    wait on it for ``stall_s`` with nothing back (EngineStalled; a launched server's process group is killed). A work
    that is not a load (a counters read: ``one_request``) is itself the one request waited on."""
    clock = progress.Progress()
    with progress.watching(clock):
        task = asyncio.ensure_future(_as_request(work, clock) if one_request else work)
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=0.25)
            if not srv.alive():
                break
            if stall_s is not None and clock.stalled(stall_s):
                error = stalled(srv, phase, stall_s, clock)
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise error
    except asyncio.CancelledError:  # Ctrl-C: the load ends here, before its HTTP session does
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    failed = task.done() and not task.cancelled() and task.exception() is not None
    if srv.alive() and (clock.connection_error or failed) and srv.process is not None:
        await asyncio.to_thread(_ended_within, srv.process, EXIT_GRACE_S)  # refused: has it died?
    if srv.alive():
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    raise exited(srv, phase)


async def _as_request(work: Awaitable[T], clock: progress.Progress) -> T:
    with clock.request():
        return await work


def _ended_within(process: Any, seconds: float) -> None:
    with contextlib.suppress(Exception):
        process.wait(timeout=seconds)


def exited(srv: servers.Server, phase: str) -> ServerExited:
    """The server's end, in words: its exit code (and signal), when, and its log's tail."""
    code = srv.process.returncode if srv.process else None
    name = f" ({signal.Signals(-code).name})" if code is not None and code < 0 else ""
    tail = log_tail(srv.log_path) if srv.log_path else "(no log)"
    return ServerExited(f"server exited with code {code}{name} {phase}; log tail:\n{tail}")


def stalled(srv: servers.Server, phase: str, stall_s: float, clock: progress.Progress) -> EngineStalled:
    """The stalled server killed when specexp launched it (the next point gets a fresh one; its
    requests fail at once), and what was seen and done, in words: an endpoint specexp did not launch
    is only no longer waited on."""
    waiting = f"{clock.in_flight} request{'s' * (clock.in_flight != 1)} in flight"
    seen = f"engine stalled: no token for {clock.idle_s():.0f} s with {waiting} {phase} (engine.stall_s={stall_s:g})"
    if srv.process is None:
        servers.discard(srv)
        return EngineStalled(f"{seen}; {srv.base_url} was not launched by specexp: its requests were abandoned")
    state = process_state(srv.process.pid)
    tail = log_tail(srv.log_path) if srv.log_path else "(no log)"
    servers.discard(srv)
    return EngineStalled(f"{seen}; process state: {state}; its process group was killed; log tail:\n{tail}")


# An exception's last line (``RuntimeError: ... not enough memory``), not an access log's "500 Internal Server Error".
CAUSE = re.compile(r"^\s*[\w.]*(Error|Exception)(\s*\[[^]]*\])?:\s|\bout of memory\b", re.IGNORECASE)


def server_cause(log_path: Path, start: int) -> str:
    """The last line of this point's slice of the server log that names an error (the allocation
    that failed, the exception), for the point's reason: the client only sees "engine failure"."""
    try:
        with log_path.open("rb") as f:
            f.seek(start)
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    found = [line.strip() for line in lines if CAUSE.search(line)]
    return f"; the server's log says: {redaction.scrub(found[-1])[:1000]}" if found else ""
