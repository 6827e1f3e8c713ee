"""Ctrl-C as a tool takes it: the first one stops the measuring, and what must be recorded (a point's
files and upload, the sweep's summary, the parent run's state, the servers' teardown) is finished
even if Ctrl-C comes again meanwhile; then one line says what was kept, and the exit code is 130."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, after the record was completed: carries the one line saying what was kept."""


@contextlib.contextmanager
def deferred(reraise: bool = True) -> Iterator[None]:
    """Hold SIGINT while the block records what must not be cut short; a Ctrl-C that came meanwhile
    is raised as the block ends (``reraise``, when nothing else is on its way up; not while an
    interrupt is being handled already). Inside another such block it is that block's to raise, as
    it ends. Only the main thread gets signals; elsewhere, or where SIGINT is ignored, the block
    runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, None) or getattr(previous, "holding", False):
        yield  # ignored, or an enclosing block holds Ctrl-C already: that block decides when it ends
        return
    pending: list[int] = []

    def hold(signum: int, _frame: object) -> None:
        if not pending:
            print("interrupted again: finishing the record first (a few seconds)", file=sys.stderr, flush=True)
        pending.append(signum)

    hold.holding = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pending and reraise:
        raise KeyboardInterrupt


def settled() -> None:
    """The record is complete and the exit code decided (130): a Ctrl-C from now on, while the
    interpreter shuts down (MLflow's and torch's exit hooks), changes nothing. Main thread only."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
