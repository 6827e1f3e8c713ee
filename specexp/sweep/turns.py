"""Arms measured side by side, their windows taking turns in a serpentine order: every arm starts
first (server, warm-up), then A B | B0 A0 | A1 B1 | B2 A2 (three arms: A B C | C0 B0 A0 | A1 B1 C1).

A speedup divides two arms' throughputs; noise of the machine that lasts longer than a window (a
neighbour's burst, clocks) lands in it whole when one arm is measured after the other. Here the
arms' points at one load run in threads of one process, one at a time: each holds the machine
(server start, warm-up, windows, writing its results) and lets go only while it waits for its next
window, which comes when every other arm still measuring has had one in this round. The first round
is the arms' starts, so that window 0 of each lies beside the other's as every later window does
(not a server start apart). Each round goes the other way round the arms (the last of one round
opens the next), so that in window i's pair the arm that goes first alternates with i: a drift
that is linear in time puts +b on half the pairs' log ratios and -b on the others, and cancels in
their mean (an ABBA design) instead of biasing every pair the same way. An arm that ends (done or
failed) leaves the rotation; the others go on without it. With ``measure.rel_ci`` the arms stop
together, at the first look where every speculative arm's speedup over the baseline is that precise
(specexp.metrics.joint_stop): an arm whose go comes after they stopped leaves without its window.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from specexp import signals
from specexp.metrics.joint_stop import ArmTurn, JointStop

T = TypeVar("T")

RECORD_S = 10.0  # how long the interrupted arm gets to record itself before its server is stopped
JOIN_AFTER_INTERRUPT_S = 60.0  # and then, how long the arms get to end


class Interrupted(KeyboardInterrupt):
    """Raised in an arm whose job was interrupted (signals reach only the main thread)."""


class Turns:
    """Whose go it is: one arm holds the machine at a time, windows go round the arms, each round
    the other way (module doc)."""

    def __init__(self, arms: int) -> None:
        self._cond = threading.Condition()
        self._active = list(range(arms))  # arms still measuring, in turn order
        self._next = 0  # the arm whose window (or start) comes next
        self._step = 1  # the way this round goes round _active: +1 or -1
        self._holder: int | None = None
        self._between: set[int] = set()  # arms past a window, not yet waiting for the next (recording?)
        self._started: set[int] = set()  # arms past their start (server, warm-up): measuring
        self.cancelled = False

    def _wait_for_go(self, arm: int) -> None:
        """Let go of the machine and wait until it is ``arm``'s go; then hold it. An arm's first wait
        for a window ends its start, its turn in the first round: the next arm goes."""
        with self._cond:
            if arm in self._active and arm not in self._started and self._holder == arm:
                self._started.add(arm)
                self._next = self._following(arm)
            self._between.discard(arm)
            if self._holder == arm:
                self._holder = None
                self._cond.notify_all()
            self._cond.wait_for(lambda: self.cancelled or (self._holder is None and self._next == arm))
            if self.cancelled:
                raise Interrupted("the job was interrupted")
            self._holder = arm

    def _following(self, arm: int) -> int:
        """The arm still measuring that comes after ``arm`` this round; at the round's end the round
        turns, and ``arm`` itself opens the next one."""
        i = self._active.index(arm) + self._step
        if 0 <= i < len(self._active):
            return self._active[i]
        self._step = -self._step
        return arm

    def _pass_on(self, arm: int) -> None:
        """``arm`` had its window: the next arm still measuring goes next (it keeps the machine until
        it waits again or leaves)."""
        with self._cond:
            if arm in self._active:
                self._next = self._following(arm)
            self._between.add(arm)
            self._cond.notify_all()

    @contextmanager
    def window(self, arm: int) -> Iterator[None]:
        """One measured window of ``arm``, in its turn."""
        self._wait_for_go(arm)
        try:
            yield
        except Exception:
            if self.cancelled:  # the server was stopped under it: the job's interrupt, not a failure
                raise Interrupted("the job was interrupted during a measured window") from None
            raise
        finally:
            self._pass_on(arm)

    @contextmanager
    def arm(self, arm: int) -> Iterator[None]:
        """``arm``'s whole point: it starts in its turn and leaves the rotation however it ends."""
        self._wait_for_go(arm)
        try:
            yield
        finally:
            with self._cond:
                if self._next == arm and len(self._active) > 1:
                    following = self._following(arm)
                    self._next = following if following != arm else self._following(arm)
                self._active.remove(arm)
                if self._holder == arm:
                    self._holder = None
                self._cond.notify_all()

    @property
    def holder(self) -> int | None:
        """The arm holding the machine (starting its server, warming up, measuring, recording)."""
        return self._holder

    def interrupt(self, arm: int, thread: threading.Thread) -> None:
        """Raise Interrupted in ``arm``'s ``thread`` if it is starting or in a window. Decided and sent
        under the lock a window's end takes, so it lands inside that window, never in the recording
        after it; an arm past a window records its point (its last window) or raises Interrupted as
        it waits for its next."""
        with self._cond:
            if arm not in self._between:
                _raise_in(thread)

    def cancel(self) -> None:
        with self._cond:
            self.cancelled = True
            self._cond.notify_all()


def _raise_in(thread: threading.Thread) -> None:
    """Raise Interrupted in ``thread`` at its next bytecode, as SIGINT does in the main thread: the
    arm records its point as interrupted, wherever it was (starting its server, warming up)."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(Interrupted))


def side_by_side(
    work: Sequence[Callable[[Callable[[], object]], T]], on_interrupt: Callable[[], None]
) -> list[T | BaseException]:
    """Run each ``work(turn)`` in a thread of its own, one at a time, ``turn()`` entered around each of
    its measured windows (an ArmTurn: it also carries the arms' joint stop, which each arm leaves as it
    ends); what each returned or raised, in order. An interrupt of this (the main)
    thread reaches the arms: the one holding the machine gets Interrupted raised in it (unless it is
    past its last window, recording its point: that is let finish), arms waiting for a go raise it
    themselves, and each records its point; then ``on_interrupt`` (stopping the servers) ends
    whatever is left, and the interrupt goes on up.

    The arms are waited for on events, not Thread.join: a join cut short by KeyboardInterrupt can
    leave the thread marked as stopped while it runs (CPython 3.11), and the interrupt would then
    go on up while an arm still writes its results."""
    turns = Turns(len(work))
    joint = JointStop(len(work))
    outcomes: list[T | BaseException] = [Interrupted("never started")] * len(work)
    ended = [threading.Event() for _ in work]

    def run(i: int) -> None:
        try:
            with turns.arm(i):
                try:
                    outcomes[i] = work[i](ArmTurn(functools.partial(turns.window, i), joint, i))
                finally:  # before the next arm's go: a look may be complete without this arm
                    joint.leave(i)
        except BaseException as exc:  # handed to the main thread
            outcomes[i] = exc
        finally:
            ended[i].set()

    threads = [threading.Thread(target=run, args=(i,), name=f"arm-{i}", daemon=True) for i in range(len(work))]
    try:
        for t in threads:
            t.start()
        for done in ended:
            while not done.wait(timeout=0.5):  # a timed wait lets SIGINT and SIGTERM reach this thread
                pass
    except BaseException:
        with signals.deferred(reraise=False):  # the arms' records and the servers' stop: Ctrl-C again is held
            holder = turns.holder
            turns.cancel()
            for t, done in zip(threads, ended, strict=True):
                if t.ident is None:  # interrupted before it started: nothing to wait for
                    done.set()
            if holder is not None and not ended[holder].is_set():
                turns.interrupt(holder, threads[holder])
                ended[holder].wait(RECORD_S)
            on_interrupt()
            for done in ended:
                done.wait(JOIN_AFTER_INTERRUPT_S)
        raise
    return outcomes
