"""Live progress of a run or a sweep, on stderr: a line as each point starts and ends, the server's
launch and readiness, and the verdict as it firms up; while a window runs, one status line per point
(``point 3/8 drafter=tiny batch=4 · window 2/3 · 12/16 requests · ETA 0:14``).

Only on a terminal, and only while specexp logs at INFO: when stderr is a file or a pipe, or
``hydra.verbose`` turns specexp's debug logging on (whose lines a redrawn status would tear), it
prints plain lines instead, one per point as it ends. Points of arms taking turns run in threads of
their own: each thread's point is its own (``_here``), and one lock guards the shared display.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from specexp.records import RequestRecord

# Tables are meant to be pasted: keep them wide when the output is a file or a pipe, unless COLUMNS
# says how wide (a terminal's width, or COLUMNS, is what tables fit: specexp.console.PointsTable).
console = Console(stderr=True, width=None if sys.stderr.isatty() or os.environ.get("COLUMNS") else 200)


def live() -> bool:
    """Whether to draw live status lines: a terminal, and no debug logging under them."""
    return console.is_terminal and not logging.getLogger("specexp").isEnabledFor(logging.DEBUG)


@dataclass
class PointState:
    """A point in progress: where it is and how fast its windows went."""

    number: int  # 1-based, as shown
    label: str
    windows: int  # windows asked for (the least, under a precision target)
    started: float = field(default_factory=time.monotonic)
    window: int = 0  # the window in progress, 1-based; 0 before the first
    done: int = 0  # requests finished in this window
    requests: int = 0  # requests in this window
    window_started: float = 0.0
    tokens: int = 0
    task: TaskID | None = None

    def name(self, total: int) -> str:
        of = f"/{max(total, self.number)}" if total else ""
        return f"point {self.number}{of} {self.label}"

    def eta_s(self) -> float | None:
        """Seconds left in the point: this window's rest at its pace so far, then the windows still asked for."""
        if not self.done:
            return None
        elapsed = time.monotonic() - self.window_started
        per_window = elapsed * self.requests / self.done
        return per_window - elapsed + max(0, self.windows - self.window) * per_window


class Display:
    """The shared display: the points in progress, the sweep's size, the verdict shown last."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.total = 0
        self.progress: Progress | None = None
        self.points: list[PointState] = []
        self.verdict: list[str] = []
        self.server: TaskID | None = None

    def _progress(self) -> Progress:
        if self.progress is None:
            columns = (
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(bar_width=16),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
            )
            self.progress = Progress(*columns, console=console, transient=True)
            self.progress.start()
        return self.progress

    def _idle(self) -> None:
        """Stop the status lines once nothing runs (they are redrawn from the next point on)."""
        if self.progress is not None and not self.points and self.server is None:
            self.progress.stop()
            self.progress = None

    def say(self, line: str) -> None:
        """A line kept above the status lines."""
        with self.lock:
            (self.progress.console if self.progress else console).print(line, highlight=False, soft_wrap=True)


_display = Display()
_here = threading.local()  # the point this thread measures


def expect(total: int) -> None:
    """The sweep's points so far (it may grow: a tuner's trials, a resumed sweep's)."""
    with _display.lock:
        _display.total = max(_display.total, total)


def point_started(number: int, label: str, windows: int) -> None:
    """The calling thread measures point ``number`` (1-based) from now on."""
    state = PointState(number, label, windows)
    _here.point = state
    with _display.lock:
        _display.points.append(state)
        if live():
            _display.say(f"{state.name(_display.total)} · started")
            state.task = _display._progress().add_task(state.name(_display.total), total=None, status="starting")
            _holds(state)


def _holds(state: PointState) -> None:
    """``state``'s point holds the machine now. Points in progress side by side are arms taking turns
    (specexp.sweep.turns), one at a time: any other still before its first window waits its turn."""
    for other in _display.points:
        if other is not state and other.window == 0 and other.task is not None and _display.progress is not None:
            _display.progress.update(other.task, status="waiting its turn")


def point_ended(status: str, summary: str) -> None:
    """The calling thread's point ended: one line (``summary``: its headline figures, or its error)."""
    state: PointState | None = getattr(_here, "point", None)
    if state is None:
        return
    _here.point = None
    with _display.lock:
        took = time.monotonic() - state.started
        _display.say(f"{state.name(_display.total)} · {status} in {took:.0f} s · {summary}")
        if state in _display.points:
            _display.points.remove(state)
        if state.task is not None and _display.progress is not None:
            _display.progress.remove_task(state.task)
        _display._idle()


@contextmanager
def server_launch(what: str) -> Iterator[Callable[[float, bool], None]]:
    """While a server is acquired (launched, or found up): a status line on a terminal;
    ``ready(seconds, reused)`` then says how long a launch took to be ready."""
    shown: list[bool] = []

    def ready(seconds: float, reused: bool) -> None:
        if not reused and live():
            shown.append(True)
            _display.say(f"server ready in {seconds:.1f} s: {what}")

    if not live():
        yield ready
        return
    with _display.lock:
        _display.server = _display._progress().add_task(f"server {what}", total=None, status="waiting to be ready")
    try:
        yield ready
    finally:
        with _display.lock:
            if _display.progress is not None:
                _display.progress.remove_task(_display.server)
            _display.server = None
            _display._idle()


def _window_status(state: PointState) -> str:
    eta = state.eta_s()
    rate = state.tokens / max(time.monotonic() - state.window_started, 1e-9)
    shown = f"{state.done}/{state.requests} requests · {rate:,.0f} tok/s"
    return shown + (f" · ETA {eta:.0f} s" if eta is not None else "")


@contextmanager
def window(requests: int) -> Iterator[Callable[[RequestRecord], None]]:
    """One measured window of the calling thread's point: ``on_done`` is told of each request as it ends."""
    state: PointState | None = getattr(_here, "point", None)
    if state is None or not live():
        yield lambda record: None
        return
    with _display.lock:
        state.window += 1
        state.done, state.requests, state.tokens = 0, requests, 0
        state.window_started = time.monotonic()
        asked = f"{state.window}/{state.windows}" if state.window <= state.windows else f"{state.window} (+)"
        description = f"{state.name(_display.total)} · window {asked}"
        if state.task is not None and _display.progress is not None:
            _display.progress.update(state.task, description=description, total=requests, completed=0, status="")
        _holds(state)

    def on_done(record: RequestRecord) -> None:
        with _display.lock:
            state.done += 1
            state.tokens += record.output_tokens if record.ok else 0
            if state.task is not None and _display.progress is not None:
                _display.progress.update(state.task, completed=state.done, status=_window_status(state))

    try:
        yield on_done
    finally:
        with _display.lock:
            if state.task is not None and _display.progress is not None:
                _display.progress.update(state.task, status=f"window {state.window} done, waiting for its next turn")


def verdict(lines: Sequence[str]) -> None:
    """The sweep's verdict so far, shown (on a terminal) when it changes."""
    lines = [line for line in lines if line]
    with _display.lock:
        if lines == _display.verdict:
            return
        _display.verdict = lines
        if live() and lines:
            _display.say("verdict so far: " + " | ".join(lines))
