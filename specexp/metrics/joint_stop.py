"""When a point's windows stop, and, for arms taking turns at one load (specexp.sweep.turns), when they
stop together: on their speedups, the estimand, not on one arm's throughput.

A point alone (a single run, arms one after the other) stops on its own output throughput
(``Alone``: specexp.metrics.window_results.more_windows). Arms whose windows take turns, one of them
the baseline (drafter=none), are there to be divided, so with ``measure.rel_ci`` their target is each
speedup's interval: at each pre-declared look n (specexp.metrics.sequential), once every arm still
measuring has n windows, each speculative arm's paired speedup over the n window pairs (the one
estimand, stats.arm_ratio) is made at the look's level, and all arms stop at n only if every one is
within ± rel_ci (window_results.speedups_precise). A cap stops them together too: ``max_windows``, or
``max_s`` on any arm's clock, which stops every arm at the most windows any has. The baseline measures
as long as any speculative arm does, so every speedup has its pairs. Where the arms still measuring
hold no baseline or no speculative arm, or their measure settings differ, each arm decides alone, as a
point alone does; ``stopped_on`` says which rule stopped a point (``specexp.stopped_on``).

No arm waits for another while it holds the machine: an arm whose look is undecided (other arms lack
their n-th window) asks for its next window's go as usual; the arm whose window completes the look
(the last to reach n, or the last one missing that leaves) decides for all, and an arm whose go
comes after the arms stopped leaves without measuring (``Stopped``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from specexp.config import MeasureConfig
from specexp.metrics import sequential
from specexp.metrics.window_results import TREND_KEY, more_windows, speedups_precise

SPEEDUP = "speedup"  # arms taking turns with a baseline stopped together on their speedups
OWN = TREND_KEY  # a point stopped on its own output throughput's interval
FIXED = "windows"  # no precision target: measure.windows windows (or a cap)

Windows = Sequence[dict[str, float]]


class Stopped(Exception):
    """An arm's go for a window came after the arms taking turns stopped: it leaves without it."""


class Stopping(Protocol):
    """Whether a point measures another window, and which rule stopped it."""

    @property
    def stopped_on(self) -> str: ...

    def more(self, windows: Windows, elapsed_s: float) -> bool: ...


@dataclass
class Alone:
    """A point deciding alone, on its own output throughput (window_results.more_windows)."""

    measure: MeasureConfig

    @property
    def stopped_on(self) -> str:
        return FIXED if self.measure.rel_ci is None else OWN

    def more(self, windows: Windows, elapsed_s: float) -> bool:
        return more_windows([w.get(TREND_KEY, 0.0) for w in windows], self.measure, elapsed_s)


@dataclass
class _Joined:
    """An arm as the joint stop knows it: its settings, whether it is the baseline, its windows so far."""

    measure: MeasureConfig
    baseline: bool
    windows: list[dict[str, float]] = field(default_factory=list)


class JointStop:
    """The stop shared by arms taking turns at one load (module doc). Each arm joins as it starts;
    ``leave`` when it ends, however."""

    def __init__(self, arms: int) -> None:
        self._lock = threading.Lock()
        self._active = set(range(arms))
        self._joined: dict[int, _Joined] = {}
        self._decided = 0  # the last look decided
        self.until: int | None = None  # every arm stops at this many windows (decided, or a cap)

    def join(self, arm: int, measure: MeasureConfig, baseline: bool) -> ArmStop:
        with self._lock:
            self._joined[arm] = _Joined(measure, baseline)
        return ArmStop(self, arm, Alone(measure).stopped_on)

    def leave(self, arm: int) -> None:
        """``arm`` measures no more (done, failed, interrupted): a look may be complete without it."""
        with self._lock:
            self._active.discard(arm)
            self._decide()

    def stopped(self, arm: int) -> bool:
        """Whether ``arm``'s next window was ruled out while it waited for its go."""
        with self._lock:
            return self.until is not None and self._count(arm) >= self.until

    def _count(self, arm: int) -> int:
        joined = self._joined.get(arm)
        return 0 if joined is None else len(joined.windows)

    def _together(self) -> tuple[int, list[int], MeasureConfig] | None:
        """The baseline, the speculative arms still measuring and their settings, where they stop
        together on the speedups; None where each decides alone."""
        arms = {i: a for i, a in self._joined.items() if i in self._active}
        bases = sorted(i for i, a in arms.items() if a.baseline)
        spec = sorted(i for i, a in arms.items() if not a.baseline)
        if not bases or not spec:
            return None
        measure = arms[bases[0]].measure
        if measure.rel_ci is None or any(a.measure != measure for a in arms.values()):
            return None
        return bases[0], spec, measure

    def _decide(self) -> None:
        """Every look that all arms still measuring have reached, in order, until one stops them."""
        together = self._together()
        if together is None or self.until is not None:
            return
        base, spec, measure = together
        reached = min(self._count(i) for i in self._active)
        for n in sequential.looks(measure.windows, measure.max_windows):
            if self._decided < n <= reached:
                self._decided = n
                arms = [self._joined[i].windows for i in spec]
                if speedups_precise(self._joined[base].windows[:n], arms, measure):
                    self.until = n
                    return

    def more(self, arm: int, windows: Windows, elapsed_s: float) -> tuple[bool, str]:
        """Whether ``arm``, with ``windows`` so far, measures another, and the rule that says so."""
        with self._lock:
            joined = self._joined[arm]
            joined.windows = list(windows)
            if self._together() is None and self.until is None:
                alone = Alone(joined.measure)
                return alone.more(windows, elapsed_s), alone.stopped_on
            self._decide()
            measure, k = joined.measure, len(windows)
            capped = k >= measure.max_windows or (measure.max_s is not None and elapsed_s >= measure.max_s)
            if self.until is None and capped:
                self.until = max(self._count(i) for i in self._active)
            return self.until is None or k < self.until, SPEEDUP


@dataclass
class ArmStop:
    """One arm's view of the joint stop (a Stopping)."""

    joint: JointStop
    arm: int
    stopped_on: str

    def more(self, windows: Windows, elapsed_s: float) -> bool:
        go_on, self.stopped_on = self.joint.more(self.arm, windows, elapsed_s)
        return go_on


@dataclass(frozen=True)
class ArmTurn:
    """What an arm taking turns is handed: ``window`` around each measured window (its go, then
    passing it on), and the arms' joint stop; a go that comes after they stopped raises Stopped."""

    window: Callable[[], AbstractContextManager[object]]
    joint: JointStop
    arm: int

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self.window():
            if self.joint.stopped(self.arm):
                raise Stopped(f"arm {self.arm}: the arms stopped at {self.joint.until} windows")
            yield


def stopping(turn: object, measure: MeasureConfig, baseline: bool) -> Stopping:
    """A point's stopping rule: joined to its arms' joint stop where it takes turns (``turn`` is an
    ArmTurn), else ``Alone``. ``baseline``: the point is not speculative."""
    if isinstance(turn, ArmTurn):
        return turn.joint.join(turn.arm, measure, baseline)
    return Alone(measure)
