"""Sweep-level analysis (METRICS.md "Sweep level"): pairing with baselines, speedups and crossovers
with 95% intervals, and the points that break their curve.

Pure functions over the points of a sweep (specexp.result.PointResult): their flattened params
(``engine.name``, ``drafter.name``, ``batch``, ``repeat``, ...) and metrics (a mean, ``<key>_ci95``
and ``windows``). A series of points varies one load axis: the batch (closed loop) or the request
rate (open loop); crossovers are read along it. A point measured on several server launches
(``repeats``) has one result per launch.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from specexp.config import SloConfig
from specexp.load.host import CLIENT_CPU_WARNING
from specexp.metrics.stats import Estimate, combine, from_interval, ratio
from specexp.result import PointResult

# Params that differ between points of one sweep without making them different experiments.
_NOT_IDENTITY = ("sweep_id", "run_name", "max_batch", "dry_run", "repeat", "measure.", "tracking.")
SPEEDUPS = (("speedup", "output_throughput"), ("decode_speedup", "decode_speed_mean"))
CROSSOVER_DRAWS = 4000


@dataclass(frozen=True)
class Axis:
    """A swept load axis, and the speedup that says whether speculation pays along it."""

    label: str  # the x axis of figures
    at: str  # a place on it in words: "batch {x}" or "rate {x} req/s"
    value: str  # a value along it (a break-even): "{x}" or "{x} req/s"
    ratio: str  # speedup (output throughput) at a batch; decode_speedup at a rate
    crossover: str  # the sweep-level key where that ratio falls below 1


# Below saturation every drafter of an open loop carries the offered rate, so their throughputs agree;
# speculation pays there in per-stream speed (decode_speedup), which is what a user of a stream sees.
AXES = {
    "closed": Axis("batch", "batch {x}", "{x}", "speedup", "crossover_batch"),
    "rate": Axis("request rate (req/s)", "rate {x} req/s", "{x} req/s", "decode_speedup", "crossover_rate"),
}
AXIS_PARAMS = ("batch", "rate", "load.rate")  # what the axes vary: never part of a series' identity


def x_of(row: PointResult) -> float:
    """The point's place on its load axis: its request rate (open loop) or its batch."""
    return row.rate if row.load == "rate" and row.rate is not None else float(row.batch)


def identity(row: PointResult, drop: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    """The point's settings minus the drafter (and ``drop``): equal for a point and its baseline."""
    return tuple(
        sorted(
            (k, str(v))
            for k, v in row.params.items()
            if not k.startswith(("drafter.", *_NOT_IDENTITY)) and k not in drop
        )
    )


def launch(row: PointResult) -> int:
    """Which of the point's server launches (``repeat``) measured this row."""
    return int(row.params.get("repeat", 0))


def metric_estimate(row: PointResult, key: str) -> Estimate | None:
    """A point's metric as it was measured: the mean over its windows with their interval."""
    metrics = row.metrics
    if metrics.get(key) is None:
        return None
    return from_interval(metrics[key], metrics.get(f"{key}_ci95"), int(metrics.get("windows", 1)))


def speedup_estimates(rows: Sequence[PointResult]) -> dict[int, dict[str, Estimate]]:
    """For each ok speculative row (by index) with an ok baseline from the same launch round:
    ``speedup`` and ``decode_speedup`` as estimates. Launches of one round run back to back (the
    sweeper interleaves A B A B), so a row and its baseline share the machine's drift."""
    baselines = {(identity(r), launch(r)): r for r in rows if not r.speculative and r.ok}
    out: dict[int, dict[str, Estimate]] = {}
    for i, row in enumerate(rows):
        base = baselines.get((identity(row), launch(row)))
        if not row.speculative or base is None or not row.ok:
            continue
        ratios = {}
        for key, metric in SPEEDUPS:
            num, den = metric_estimate(row, metric), metric_estimate(base, metric)
            if num is not None and den is not None and den.value:
                ratios[key] = ratio(num, den)
        out[i] = ratios
    return out


def as_metrics(estimates: dict[int, dict[str, Estimate]]) -> dict[int, dict[str, float]]:
    """Estimates as a run records them: ``<key>`` and, where there is an interval, ``<key>_ci95``."""
    out: dict[int, dict[str, float]] = {}
    for i, ratios in estimates.items():
        out[i] = {}
        for key, est in ratios.items():
            out[i][key] = est.value
            if est.known:
                out[i][f"{key}_ci95"] = est.half
    return out


def pair_speedups(rows: Sequence[PointResult]) -> dict[int, dict[str, float]]:
    """``speedup`` and ``decode_speedup`` per speculative row, with ``_ci95`` where both were
    measured in more than one window: what each point's run records."""
    return as_metrics(speedup_estimates(rows))


def crossover(points: Sequence[tuple[float, float]], level: float = 1.0) -> float | None:
    """The largest x (batch, rate) at which y is still >= ``level``, interpolated linearly in log2(x)
    between the last x at or above it and the next (below it); None when always or never above."""
    pts = sorted(points)
    if all(s >= level for _, s in pts) or all(s < level for _, s in pts):
        return None
    for (b0, s0), (b1, s1) in reversed(list(itertools.pairwise(pts))):
        if s0 >= level > s1:
            frac = (s0 - level) / (s0 - s1)
            return 2 ** (math.log2(b0) + frac * (math.log2(b1) - math.log2(b0)))
    return None  # above only after below: no x past which it stops


def _break_even(points: Sequence[tuple[float, float]], level: float) -> float:
    """crossover, with the cases it leaves out placed at the edges: +inf when y stays at or above
    ``level`` everywhere (the crossing lies beyond the largest x), -inf when it never does before
    falling below."""
    value = crossover(points, level)
    if value is not None:
        return value
    return math.inf if all(s >= level for _, s in points) else -math.inf


def crossover_interval(
    points: dict[float, Estimate], level: float = 1.0, draws: int = CROSSOVER_DRAWS
) -> tuple[float, float]:
    """The 95% interval of the crossing: every point's y drawn from its own sampling distribution
    (Student-t), all points of a draw together, the crossing of each draw, and the 2.5th and 97.5th
    percentiles. -inf / +inf: in more than 2.5% of draws y never reaches / never leaves ``level``.
    Seeded: the same points give the same interval."""
    rng = np.random.default_rng(0)
    xs = sorted(points)
    curves = np.column_stack([points[x].draws(rng, draws) for x in xs])
    values = np.array([_break_even(list(zip(xs, curve, strict=True)), level) for curve in curves])
    return float(np.percentile(values, 2.5, method="lower")), float(np.percentile(values, 97.5, method="higher"))


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


@dataclass
class Series:
    """One drafter's speedup along one load axis in one setting (an engine, a decode, ...)."""

    drafter: str
    axis: Axis
    key: str  # <crossover stem>.<drafter>[.<what tells it apart>]
    points: dict[float, Estimate]  # x -> speedup, over the point's launches
    crossover: float | None = None
    lo: float = -math.inf  # the crossover's 95% bounds (see crossover_interval)
    hi: float = math.inf
    unstable: list[float] = field(default_factory=list)  # breaks the curve
    unsettled: list[float] = field(default_factory=list)  # stopped by a cap before its windows settled
    client_cpu: dict[float, float] = field(default_factory=dict)  # x -> the load client's share of a core

    @property
    def intervals(self) -> bool:
        return any(p.known for p in self.points.values())

    @property
    def label(self) -> str:
        """``tiny``, or ``tiny (torch)`` when the drafter was measured in several settings."""
        extra = self.key.removeprefix(f"{self.axis.crossover}.{self.drafter}").lstrip(".")
        return f"{self.drafter} ({extra})" if extra else self.drafter


def client_bound(rows: Sequence[PointResult]) -> dict[float, float]:
    """Places at which the load client used at least CLIENT_CPU_WARNING of a core (speculative or
    baseline point, any launch), with the largest share seen."""
    out: dict[float, float] = {}
    for row in rows:
        share = row.metrics.get("client_cpu", 0.0)
        if share >= CLIENT_CPU_WARNING:
            out[x_of(row)] = max(share, out.get(x_of(row), 0.0))
    return dict(sorted(out.items()))


def _places(rows: Sequence[PointResult], indices: Sequence[int], stem: str) -> dict[str, dict[float, list[int]]]:
    """Rows grouped into series (points that differ only along their load axis), by sweep-level key:
    ``<stem>.<drafter>``, suffixed with the settings that tell a drafter's series apart when it was
    measured in several (e.g. on two engines); each series maps x to its rows (one per launch)."""
    grouped: dict[tuple[str, tuple], dict[float, list[int]]] = {}
    for i in indices:
        key = (rows[i].drafter, identity(rows[i], drop=AXIS_PARAMS))
        grouped.setdefault(key, {}).setdefault(x_of(rows[i]), []).append(i)
    by_drafter: dict[str, list[tuple]] = {}
    for name, ident in grouped:
        by_drafter.setdefault(name, []).append(ident)
    out = {}
    for (name, ident), places in grouped.items():
        label = f"{stem}.{name}"
        if len(by_drafter[name]) > 1:
            label += "." + ".".join(v for k, v in _differing(ident, by_drafter[name]))
        out[label] = dict(sorted(places.items()))
    return out


def series(rows: Sequence[PointResult], estimates: dict[int, dict[str, Estimate]]) -> list[Series]:
    """The speedup series: per drafter and setting, the axis' speedup at each x, combined over launches."""
    out = []
    for load, axis in AXES.items():
        indices = [i for i, ratios in estimates.items() if rows[i].load == load and axis.ratio in ratios]
        for key, places in _places(rows, indices, axis.crossover).items():
            first = rows[next(iter(places.values()))[0]]
            points = {x: combine([estimates[i][axis.ratio] for i in idx]) for x, idx in places.items()}
            s = Series(first.drafter, axis, key, points, unstable=breaks_trend(points))
            settled = {x: all(rows[i].metrics.get("windows_settled", 1) for i in idx) for x, idx in places.items()}
            s.unsettled = [x for x, ok in settled.items() if not ok]
            ident = identity(first, drop=AXIS_PARAMS)
            s.client_cpu = client_bound([r for r in rows if r.ok and identity(r, drop=AXIS_PARAMS) == ident])
            trusted = {x: p for x, p in points.items() if x not in s.unstable and x not in s.unsettled}
            if trusted:  # the crossover from the points that can be believed
                s.crossover = crossover([(x, p.value) for x, p in trusted.items()])
                if s.intervals:
                    s.lo, s.hi = crossover_interval(trusted)
            out.append(s)
    return out


def crossovers(all_series: Sequence[Series]) -> dict[str, float]:
    """``crossover_batch.<drafter>`` (or ``crossover_rate``) per series, absent when it always or
    never wins, and its finite 95% bounds as ``<key>_lo`` / ``<key>_hi``: the parent run's metrics."""
    out: dict[str, float] = {}
    for s in all_series:
        if s.crossover is not None:
            out[s.key] = s.crossover
        for suffix, bound in (("_lo", s.lo), ("_hi", s.hi)):
            if s.intervals and math.isfinite(bound):
                out[s.key + suffix] = bound
    return out


def slo_target(row: PointResult) -> float:
    """The point's slo.target (its default for a point recorded without one)."""
    return float(row.params.get("slo.target", SloConfig.target))


def slo_rates(rows: Sequence[PointResult]) -> dict[str, float]:
    """``slo_max_rate.<drafter>`` per series of open-loop points, the baseline's included: the largest
    rate at which slo_attainment still reaches slo.target, with 95% bounds drawn as for crossovers."""
    found = {
        i: est
        for i, r in enumerate(rows)
        if r.ok and r.load == "rate" and (est := metric_estimate(r, "slo_attainment")) is not None
    }
    out: dict[str, float] = {}
    for key, places in _places(rows, list(found), "slo_max_rate").items():
        points = {x: combine([found[i] for i in idx]) for x, idx in places.items()}
        level = min(slo_target(rows[i]) for idx in places.values() for i in idx)
        value = crossover([(x, p.value) for x, p in points.items()], level)
        if value is not None:
            out[key] = value
        if any(p.known for p in points.values()):
            lo, hi = crossover_interval(points, level)
            out |= {key + suffix: bound for suffix, bound in (("_lo", lo), ("_hi", hi)) if math.isfinite(bound)}
    return out


def _differing(ident: tuple, others: list[tuple]) -> list[tuple[str, str]]:
    keys = {k for other in others for k, v in other if (k, v) not in ident} | {
        k for k, v in ident if any((k, v) not in other for other in others)
    }
    return [(k, v) for k, v in ident if k in keys]


@dataclass
class Analysis:
    speedups: dict[int, dict[str, float]]  # row index -> its speedup keys, as its run records them
    series: list[Series]
    crossovers: dict[str, float]  # the parent run's keys: crossovers and SLO rates


def apply(rows: Sequence[PointResult]) -> Analysis:
    """Pair every point with its baseline, merge ``speedup``/``decode_speedup`` (and their ``_ci95``)
    into its metrics (replacing any logged earlier), and build the series and sweep-level keys."""
    for row in rows:
        for key, _ in SPEEDUPS:
            row.metrics.pop(key, None)
            row.metrics.pop(f"{key}_ci95", None)
    estimates = speedup_estimates(rows)
    speedups = as_metrics(estimates)
    for i, ratios in speedups.items():
        rows[i].metrics |= ratios
    found = series(rows, estimates)
    return Analysis(speedups, found, crossovers(found) | slo_rates(rows))
