"""Where to measure next when looking for the break-even batch, and when to stop: pure functions
over the speedups measured so far (batch -> Estimate), so that a search can be tried on synthetic
curves as well as run (specexp.sweep.crossover).

The break-even's distribution is the verdict's (crossing.crossing_draws, crossover_interval): every
batch's speedup (analysis.used_ratios: paired where the arms' windows took turns) drawn from its own
sampling distribution on the engine's quantile grid (stats.DRAWS; a log-scale ratio drawn
asymmetrically, as its interval is), all batches together; its 95% interval is the verdict's. The
next batch (``median_rule``) is the unmeasured whole batch that splits the drawn (last) crossings
most evenly: each measurement then halves the probability of where the break-even may lie, as
bisection halves a bracket, but it goes where the measured curve puts the crossing rather than to
the bracket's middle. Log-scale bisection (``bisection_rule``) is the baseline it is measured
against (tests/unit/test_crossover.py).

A batch is worth measuring only inside the interval, and not between two measured batches whose own
speedup intervals both hold 1 once clear batches bound that unclear zone on both sides: there a new
batch would be as unclear as its neighbours (only more windows settle it). When no batch worth
measuring is left the break-even is as narrow as the noise allows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from specexp.metrics.stats import DRAWS, Estimate, combine, side
from specexp.report.analysis import used_ratios
from specexp.report.crossing import breaks_trend, crossing_bounds, crossing_draws
from specexp.result import PointResult

Points = Mapping[int, Estimate]  # batch -> the drafter's speedup over drafter=none there
# (crossings drawn, candidate batches, measured points) -> the batch to measure next
Rule = Callable[[np.ndarray, Sequence[int], Points], int]

SEARCHING, LOCATED, ABOVE, BELOW, NOISE, BUDGET = "searching", "located", "above", "below", "noise", "budget"


@dataclass(frozen=True)
class Search:
    """The question: the break-even between ``batch_min`` and ``batch_max``, to ``resolution``
    batches at 95%, measuring at most ``max_points`` batches (the ends included)."""

    batch_min: int = 1
    batch_max: int = 64
    resolution: int = 1
    max_points: int = 6
    level: float = 1.0

    @property
    def grid(self) -> list[int]:
        """The grid that would answer to the same resolution: every ``resolution``-th batch."""
        return sorted({*range(self.batch_min, self.batch_max + 1, self.resolution), self.batch_max})


@dataclass(frozen=True)
class Step:
    """Where the search stands: the batch to measure next (None: it ends, ``status`` says why)
    and the break-even's 95% interval from the batches measured so far."""

    batch: int | None
    status: str  # searching | located | above | below | noise | budget | failed (the sweep's)
    lo: float = -math.inf
    hi: float = math.inf
    bracket: tuple[int, int] | None = None  # located: the measured batches that hold the interval


def batch_speedups(rows: Sequence[PointResult]) -> dict[int, Estimate]:
    """The drafter's speedup (output throughput over drafter=none) at each batch of ``rows``, one
    setting's points, as the verdict reads it (analysis.used_ratios), combined over its launches."""
    found: dict[int, list[Estimate]] = {}
    for i, ratios in used_ratios(rows).items():
        if "speedup" in ratios:
            found.setdefault(rows[i].batch, []).append(ratios["speedup"])
    return {b: combine(parts) for b, parts in sorted(found.items())}


def _noise_bound(points: Points, b: int, level: float) -> bool:
    """Whether ``b`` lies between two measured batches whose speedup intervals both hold ``level``,
    inside a zone that clear batches bound on both sides (one that pays below, one that loses above):
    there a new batch is as unclear as its neighbours, and only more windows settle it. The classes
    are the verdict's (stats.side)."""
    below = [x for x in points if x < b]
    above = [x for x in points if x > b]
    a, c = max(below), min(above)
    if side(points[a], level) or side(points[c], level):
        return False
    return any(side(points[x], level) > 0 for x in below if x < a) and any(
        side(points[x], level) < 0 for x in above if x > c
    )


def candidates(points: Points, search: Search, lo: float, hi: float) -> list[int]:
    """Unmeasured batches from floor(lo) to ceil(hi) in the range (those that may bracket the
    interval), except those only more windows would settle (``_noise_bound``)."""
    first = max(search.batch_min, math.floor(lo)) if math.isfinite(lo) else search.batch_min
    last = min(search.batch_max, math.ceil(hi)) if math.isfinite(hi) else search.batch_max
    return [b for b in range(first, last + 1) if b not in points and not _noise_bound(points, b, search.level)]


def _bracket(points: Points, lo: float, hi: float, resolution: int) -> tuple[int, int] | None:
    """Measured batches a <= lo and c >= hi at most ``resolution`` apart, if any."""
    below = [x for x in points if x <= lo]
    above = [x for x in points if x >= hi]
    if below and above and min(above) - max(below) <= resolution:
        return max(below), min(above)
    return None


def median_rule(drawn: np.ndarray, options: Sequence[int], points: Points) -> int:
    """The option that splits the drawn crossings most evenly; of two as even, the one nearer the
    median crossing on a log scale."""
    median = float(np.median(np.clip(drawn, min(points), max(points))))

    def score(b: int) -> tuple[float, float]:
        return abs(float(np.mean(drawn < b)) - 0.5), abs(math.log2(b) - math.log2(median))

    return min(options, key=score)


def bisection_rule(drawn: np.ndarray, options: Sequence[int], points: Points) -> int:
    """The baseline: the unmeasured batch nearest (log scale) the geometric middle of the bracket,
    the last measured batch whose speedup is at or above 1 and the first after it; once the bracket
    holds no batch, the option nearest its middle."""
    xs = sorted(points)
    paying = [x for x in xs if points[x].value >= 1.0] or xs[:1]
    a = paying[-1]
    c = next((x for x in xs if x > a), xs[-1])
    middle = math.log2(a * c) / 2
    inside = [b for b in range(a + 1, c) if b not in points] or list(options)
    return min(inside, key=lambda b: abs(math.log2(b) - middle))


def next_step(points: Points, search: Search, rule: Rule = median_rule, draws: int = DRAWS) -> Step:
    """The search's next move from the batches measured so far (a batch that breaks the curve,
    crossing.breaks_trend, set aside as the verdict sets it aside): an end not yet measured, else
    stop (located, outside the range, as narrow as the noise allows, out of budget), else the batch
    ``rule`` picks among the candidates."""
    for end in (search.batch_min, search.batch_max):
        if end not in points:
            return Step(end, SEARCHING)
    trusted = {b: e for b, e in points.items() if b not in breaks_trend(points)}  # as the verdict reads them
    first, drawn = crossing_draws(trusted, search.level, draws)
    lo, hi = crossing_bounds(first, drawn)  # crossover_interval(trusted), from the same draws
    if lo == math.inf:
        return Step(None, ABOVE, lo, hi)
    if hi == -math.inf:
        return Step(None, BELOW, lo, hi)
    bracket = _bracket(trusted, lo, hi, search.resolution)
    if bracket is not None:
        return Step(None, LOCATED, lo, hi, bracket)
    if len(points) >= search.max_points:
        return Step(None, BUDGET, lo, hi)
    options = [b for b in candidates(trusted, search, lo, hi) if b not in points]
    if not options:
        return Step(None, NOISE, lo, hi)
    return Step(rule(drawn, options, trusted), SEARCHING, lo, hi)


def _bound(x: float) -> str:
    return f"{x:.1f}" if math.isfinite(x) else ("-inf" if x < 0 else "+inf")


def describe(step: Step, search: Search, measured: int) -> str:
    """The search's answer in words, with what it cost against the grid that answers as finely."""
    span = f"batch {search.batch_min}–{search.batch_max}"
    where = f"between {_bound(step.lo)} and {_bound(step.hi)} (95%)"
    match step.status:
        case "located":
            a, c = step.bracket or (0, 0)
            answer = f"break-even located between batch {a} and {c}: {where}"
        case "above":
            answer = f"pays across {span}: the break-even lies above batch {search.batch_max} (95%)"
        case "below":
            answer = f"does not pay at batch {search.batch_min}: the break-even lies below {span} (95%)"
        case "noise":
            answer = (
                f"break-even {where}, as narrow as the noise allows: every batch worth measuring inside "
                "is measured (more windows would narrow it: measure.windows, measure.rel_ci)"
            )
        case "budget":
            answer = f"break-even {where} when the budget ran out (crossover.max_points={search.max_points})"
        case "failed":
            answer = f"break-even {where} when a point failed (summary.csv; resume=latest measures it again)"
        case _:
            answer = f"break-even {where} so far: the search did not finish (resume=latest goes on)"
    grid = len(search.grid)
    return (
        f"{answer}; {measured} of {grid} batches measured ({2 * measured} points), "
        f"where a grid at resolution {search.resolution} over {span} measures {grid} ({2 * grid} points)"
    )
