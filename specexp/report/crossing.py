"""Where a speedup curve crosses 1 along its load axis, and the points that break the curve: the
break-even and its 95% interval from curves drawn from every point's sampling distribution (the
draws a batch's class is decided on, stats.side), read by the verdict (specexp.report.analysis), the
crossover search and the crossover map alike."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specexp.metrics.stats import DRAWS, Estimate, tail_count


def _between(
    xs: Sequence[float], curves: np.ndarray, rows: np.ndarray, j: np.ndarray, level: float, log: bool = False
) -> np.ndarray:
    """Where y crosses ``level`` between x[j - 1] (at or above it) and x[j] (below), linearly in log2(x);
    with ``log``, log(y) linearly in log2(x) (a curve falling by a constant factor per doubling), where y
    and the level are positive."""
    s0, s1 = curves[rows, j - 1], curves[rows, j]
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = (s0 - level) / (s0 - s1)
        if log and level > 0:
            logs = (np.log(s0) - math.log(level)) / (np.log(s0) - np.log(s1))
            frac = np.where((s0 > 0) & (s1 > 0), logs, frac)
    frac = np.where(np.isnan(frac), 1.0, np.clip(frac, 0.0, 1.0))  # nan: y drawn infinite at x[j - 1]
    log_x = np.log2(np.asarray(xs, dtype=float))
    return 2 ** (log_x[j - 1] + frac * (log_x[j] - log_x[j - 1]))


def crossings(
    xs: Sequence[float], curves: np.ndarray, level: float = 1.0, log: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``curves`` (y at the sorted ``xs``): where y first falls below ``level`` and where it
    last does (after the last x at or above it), each interpolated linearly in log2(x) between the x
    at or above and the next; +inf when y never falls below (the crossing lies beyond the largest
    x), -inf when it is below from the first x on. The two agree on a curve that crosses once."""
    curves = np.atleast_2d(curves)
    below = curves < level
    first, last = np.full(len(curves), np.inf), np.full(len(curves), np.inf)
    first[below[:, 0]] = -np.inf
    rows = np.flatnonzero(below.any(axis=1) & ~below[:, 0])
    first[rows] = _between(xs, curves, rows, np.argmax(below[rows], axis=1), level, log)
    above = ~below
    last_above = curves.shape[1] - 1 - np.argmax(above[:, ::-1], axis=1)
    last[~above.any(axis=1)] = -np.inf
    rows = np.flatnonzero(above.any(axis=1) & below[:, -1])
    last[rows] = _between(xs, curves, rows, last_above[rows] + 1, level, log)
    return first, last


def crossover(points: Sequence[tuple[float, float]], level: float = 1.0) -> float | None:
    """Where y first falls below ``level`` along x (batch, rate), interpolated linearly in log2(x)
    between the x before and that one; None when it never does or does at the first x already."""
    pts = sorted(points)
    first, _ = crossings([x for x, _ in pts], np.array([[y for _, y in pts]]), level)
    return float(first[0]) if math.isfinite(first[0]) else None


def crossover_interval(
    points: dict[float, Estimate], level: float = 1.0, draws: int = DRAWS, family: int = 1
) -> tuple[float, float]:
    """The 95% interval of the crossing: every point's y drawn from its own sampling distribution (the
    draws its class is decided on, stats.side), all points of a draw together; the lower bound is
    the 2.5% tail of where the draws first fall below ``level``, the upper bound the 2.5% tail (from
    above) of where they last do. With 95% the whole crossing (however often a noisy curve crosses)
    lies between them. -inf / +inf: in at least a 2.5% tail of draws y is below ``level`` from the
    first x on / never falls below it. Seeded: the same points give the same interval.

    This is what keeps a verdict from contradicting itself: a point whose class is not "pays" has at
    least a tail of draws below ``level``, each of which first crosses at or before it, so the lower
    bound is at or before it; a point whose class is not "loses" has at least a tail of draws at or
    above it, each of which last crosses at or after it, so the upper bound is at or after it. With
    ``family`` the tails are 2.5% / family, as the classes' (stats.side) that hold jointly."""
    return crossing_bounds(*crossing_draws(points, level, draws), family)


def _drawn(points: dict[float, Estimate], level: float, draws: int) -> tuple[np.ndarray, ...]:
    """The first and last crossings of ``draws`` curves drawn from the points' sampling distributions
    (Estimate.draws, seeded), each interpolated both ways between two points (``_between``: y, and
    log(y), linear in log2(x)), since the curve's shape between measured points is not known."""
    rng = np.random.default_rng(0)
    xs = sorted(points)
    curves = np.column_stack([points[x].draws(rng, draws) for x in xs])
    return (*crossings(xs, curves, level), *crossings(xs, curves, level, log=True))


def crossing_draws(
    points: dict[float, Estimate], level: float = 1.0, draws: int = DRAWS
) -> tuple[np.ndarray, np.ndarray]:
    """Per drawn curve, the earlier first crossing and the later last crossing of the two interpolations
    (``_drawn``): what crossover_interval reads, for a search to read too."""
    first, last, first_log, last_log = _drawn(points, level, draws)
    return np.minimum(first, first_log), np.maximum(last, last_log)


def first_crossings(
    points: dict[float, Estimate], level: float = 1.0, draws: int = DRAWS
) -> tuple[np.ndarray, np.ndarray]:
    """Per drawn curve, the earlier and the later of the two interpolations' first crossings: the first
    crossing's interval is crossing_bounds of the two."""
    first, _, first_log, _ = _drawn(points, level, draws)
    return np.minimum(first, first_log), np.maximum(first, first_log)


def crossing_bounds(first: np.ndarray, last: np.ndarray, family: int = 1) -> tuple[float, float]:
    """crossover_interval's bounds from drawn crossings: the 2.5% (/ ``family``) tail of the first ones
    from below, of the last ones from above."""
    tail = tail_count(len(first), family)
    return float(np.sort(first)[tail - 1]), float(np.sort(last)[len(last) - tail])


def _excess(p: Estimate, c: Estimate, n: Estimate) -> float:
    """How far ``c`` sticks out between its neighbours, in units of the combined intervals: > 1 when
    it is a dip or spike beyond both; 0 when it lies between them (on the trend)."""
    if not c.known or (c.value - p.value) * (c.value - n.value) <= 0:
        return 0.0
    return min(abs(c.value - o.value) / (math.hypot(c.half, o.half) or math.inf) for o in (p, n))


def breaks_trend(points: dict[float, Estimate]) -> list[float]:
    """Places whose y is a local dip or spike (both neighbours on the same side) that differs from
    each neighbour by more than their intervals combined: a point to distrust, not a trend. The
    worst one is set aside first and its neighbours judged again without it. A smooth curve,
    however bent, is never flagged; a point without an interval never is."""
    kept = dict(sorted(points.items()))
    flagged = []
    while len(kept) >= 3:
        xs = list(kept)
        scores = {
            cur: _excess(kept[prev], kept[cur], kept[nxt]) for prev, cur, nxt in zip(xs, xs[1:], xs[2:], strict=False)
        }
        worst = max(scores, key=scores.__getitem__)
        if scores[worst] <= 1:
            break
        flagged.append(worst)
        del kept[worst]
    return sorted(flagged)
