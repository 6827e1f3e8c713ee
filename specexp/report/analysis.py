"""Sweep-level analysis (METRICS.md "Sweep level"): pairing with baselines, speedups, crossovers.

Pure functions over the points of a sweep (specexp.result.PointResult). A series of points varies
one load axis: the batch (closed loop) or the request rate (open loop); crossovers are read along it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from specexp.config import SloConfig
from specexp.result import PointResult

# Params that differ between points of one sweep without making them different experiments.
_NOT_IDENTITY = ("sweep_id", "run_name", "max_batch", "dry_run", "repeats", "tracking.")


@dataclass(frozen=True)
class Axis:
    """A swept load axis, and the speedup that says whether speculation pays along it."""

    label: str  # the x axis of figures
    ratio: str  # speedup (output throughput) at a batch; decode_speedup at a rate
    crossover: str  # the sweep-level key where that ratio falls below 1


# Below saturation every drafter of an open loop carries the offered rate, so their throughputs agree;
# speculation pays there in per-stream speed (decode_speedup), which is what a user of a stream sees.
AXES = {
    "closed": Axis("batch", "speedup", "crossover_batch"),
    "rate": Axis("request rate (req/s)", "decode_speedup", "crossover_rate"),
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


def ratio_ci(num: float, num_ci: float, den: float, den_ci: float) -> float:
    """95% half-width of num/den from the two means' half-widths (first order, independent)."""
    return num / den * math.hypot(num_ci / num if num else 0.0, den_ci / den)


def pair_speedups(rows: Sequence[PointResult]) -> dict[int, dict[str, float]]:
    """For each speculative point (by index) with an ok baseline: ``speedup`` and ``decode_speedup``,
    and their ``_ci95`` half-widths when both points were repeated."""
    baselines = {identity(r): r for r in rows if not r.speculative and r.ok}
    out: dict[int, dict[str, float]] = {}
    for i, row in enumerate(rows):
        base = baselines.get(identity(row))
        if not row.speculative or base is None or not row.ok:
            continue
        ratios = {}
        for key, metric in (("speedup", "output_throughput"), ("decode_speedup", "decode_speed_mean")):
            num, den = row.metrics.get(metric), base.metrics.get(metric)
            if num is not None and den:
                ratios[key] = num / den
                num_ci, den_ci = row.metrics.get(f"{metric}_ci95"), base.metrics.get(f"{metric}_ci95")
                if num_ci is not None and den_ci is not None:
                    ratios[f"{key}_ci95"] = ratio_ci(num, num_ci, den, den_ci)
        out[i] = ratios
    return out


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


def series_crossings(
    rows: Sequence[PointResult], found: dict[int, tuple[str, float, float, float]]
) -> dict[str, float]:
    """``<stem>.<drafter>`` per series of points that differ only along their load axis, from
    ``found``: row index -> (key stem, y, y's 95% half-width, the level y must reach).

    A drafter measured in several series (e.g. on two engines) gets one key per series, suffixed
    with the settings that tell them apart. With intervals, ``<key>_lo`` / ``<key>_hi`` are the
    crossings of y's lower and upper 95% bounds (absent where that bound is always or never above
    the level): the crossing's uncertainty.
    """
    series: dict[tuple[str, str, tuple], list[tuple[float, float, float, float]]] = {}
    for i, (stem, y, ci, level) in found.items():
        key = (stem, rows[i].drafter, identity(rows[i], drop=AXIS_PARAMS))
        series.setdefault(key, []).append((x_of(rows[i]), y, ci, level))
    out: dict[str, float] = {}
    by_drafter: dict[tuple[str, str], list[tuple]] = {}
    for stem, name, ident in series:
        by_drafter.setdefault((stem, name), []).append(ident)
    for (stem, name, ident), pts in series.items():
        level = pts[0][3]
        value = crossover([(x, y) for x, y, _, _ in pts], level)
        if value is None:
            continue
        label = f"{stem}.{name}"
        if len(by_drafter[stem, name]) > 1:
            label += "." + ".".join(v for k, v in _differing(ident, by_drafter[stem, name]))
        out[label] = value
        if any(ci for _, _, ci, _ in pts):
            for suffix, sign in (("_lo", -1), ("_hi", 1)):
                bound = crossover([(x, y + sign * ci) for x, y, ci, _ in pts], level)
                if bound is not None:
                    out[label + suffix] = bound
    return out


def crossovers(rows: Sequence[PointResult], speedups: dict[int, dict[str, float]]) -> dict[str, float]:
    """Where speculation stops paying, per series: ``crossover_batch.<drafter>`` along a batch
    (output-throughput speedup), ``crossover_rate.<drafter>`` along a request rate (decode speedup)."""
    found = {}
    for i, ratios in speedups.items():
        axis = AXES[rows[i].load]
        if axis.ratio in ratios:
            found[i] = (axis.crossover, ratios[axis.ratio], ratios.get(f"{axis.ratio}_ci95", 0.0), 1.0)
    return series_crossings(rows, found)


def slo_target(row: PointResult) -> float:
    """The point's slo.target (its default for a point recorded without one)."""
    return float(row.params.get("slo.target", SloConfig.target))


def slo_rates(rows: Sequence[PointResult]) -> dict[str, float]:
    """``slo_max_rate.<drafter>`` per series of open-loop points, the baseline's included: the largest
    rate at which slo_attainment still reaches slo.target (bounds from ``slo_attainment_ci95``)."""
    found = {
        i: ("slo_max_rate", r.metrics["slo_attainment"], r.metrics.get("slo_attainment_ci95", 0.0), slo_target(r))
        for i, r in enumerate(rows)
        if r.ok and r.load == "rate" and "slo_attainment" in r.metrics
    }
    return series_crossings(rows, found)


def _differing(ident: tuple, others: list[tuple]) -> list[tuple[str, str]]:
    keys = {k for other in others for k, v in other if (k, v) not in ident} | {
        k for k, v in ident if any((k, v) not in other for other in others)
    }
    return [(k, v) for k, v in ident if k in keys]


def apply(rows: Sequence[PointResult]) -> tuple[dict[int, dict[str, float]], dict[str, float]]:
    """Pair every point with its baseline, merge ``speedup``/``decode_speedup`` into its metrics
    (replacing any logged earlier) and compute the sweep-level keys: crossovers, SLO rates."""
    for row in rows:
        row.metrics.pop("speedup", None)
        row.metrics.pop("decode_speedup", None)
    speedups = pair_speedups(rows)
    for i, ratios in speedups.items():
        rows[i].metrics |= ratios
    return speedups, crossovers(rows, speedups) | slo_rates(rows)
