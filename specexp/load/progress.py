"""The load's progress clock: when the server last answered anything, how many requests wait on it,
and whether a connection to it failed, so a stalled or dead engine is told from a slow one.

A hung engine (a stopped process, a deadlocked collective) keeps its sockets open: nothing fails,
nothing arrives. The watchdog (specexp.point.watched) reads this clock; the streaming client
(specexp.load.client.stream_one) moves it. The clock in use is a context variable, so every task the
load starts (its workers, an open loop's conversations) moves the clock of the phase that started it.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Progress:
    """Requests in flight, the last moment the server sent anything (a chunk), and the first
    connection failure seen (refused, reset: maybe the engine died). Silence counts only while
    requests wait: sending a request, or one ending (the client's own timeout too), is no sign of
    life, so a client timeout shorter than the stall cannot hide a hung engine; a gap with nothing in
    flight (an open loop's) is not counted."""

    in_flight: int = 0
    last: float = field(default_factory=time.monotonic)
    connection_error: str | None = None
    emptied: float = field(default_factory=time.monotonic)  # when nothing was left in flight

    def moved(self) -> None:
        self.last = time.monotonic()

    def idle_s(self) -> float:
        """Seconds of silence with requests in flight."""
        return time.monotonic() - self.last

    def stalled(self, stall_s: float) -> bool:
        """Requests wait on the server and nothing came back for ``stall_s`` seconds."""
        return self.in_flight > 0 and self.idle_s() >= stall_s

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """One request in flight for the block's length."""
        if self.in_flight == 0:  # the time nothing waited is no silence of the server's
            self.last += time.monotonic() - self.emptied
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.emptied = time.monotonic()

    def lost_connection(self, error: str) -> None:
        self.connection_error = self.connection_error or error


_current: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("specexp_progress", default=None)


def current() -> Progress:
    """The clock of the phase in progress (a fresh, unwatched one outside a phase)."""
    return _current.get() or Progress()


@contextlib.contextmanager
def watching(clock: Progress) -> Iterator[Progress]:
    """Make ``clock`` the one moved by the tasks created inside the block."""
    token = _current.set(clock)
    try:
        yield clock
    finally:
        _current.reset(token)
