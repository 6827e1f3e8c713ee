"""Sweep-level analysis (METRICS.md "Sweep level"): pairing with baselines, speedups, crossovers.

Pure functions over the points of a sweep (specexp.result.PointResult).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from specexp.result import PointResult

# Params that differ between points of one sweep without making them different experiments.
_NOT_IDENTITY = ("sweep_id", "run_name", "max_batch", "dry_run", "repeats", "tracking.")


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


def crossover(points: Sequence[tuple[float, float]]) -> float | None:
    """The largest batch at which speedup is still >= 1, interpolated linearly in log2(batch)
    between the last winning batch and the next (losing) one; None when it always or never wins."""
    pts = sorted(points)
    if all(s >= 1 for _, s in pts) or all(s < 1 for _, s in pts):
        return None
    for (b0, s0), (b1, s1) in reversed(list(itertools.pairwise(pts))):
        if s0 >= 1 > s1:
            frac = (s0 - 1) / (s0 - s1)
            return 2 ** (math.log2(b0) + frac * (math.log2(b1) - math.log2(b0)))
    return None  # wins only after losing: no batch past which it stops paying off


def crossovers(rows: Sequence[PointResult], speedups: dict[int, dict[str, float]]) -> dict[str, float]:
    """``crossover_batch.<drafter>`` per series of points that differ only in batch.

    A drafter measured in several series (e.g. on two engines) gets one key per series, suffixed
    with the settings that tell them apart. With repeats, ``<key>_lo`` / ``<key>_hi`` are the
    crossovers of the speedups' lower and upper 95% bounds (absent where that bound never or always
    wins): the crossover's uncertainty.
    """
    series: dict[tuple[str, tuple], list[tuple[float, float, float]]] = {}
    for i, ratios in speedups.items():
        if "speedup" in ratios:
            key = (rows[i].drafter, identity(rows[i], drop=("batch",)))
            point = (float(rows[i].batch), ratios["speedup"], ratios.get("speedup_ci95", 0.0))
            series.setdefault(key, []).append(point)
    out: dict[str, float] = {}
    by_drafter: dict[str, list[tuple]] = {}
    for name, ident in series:
        by_drafter.setdefault(name, []).append(ident)
    for (name, ident), pts in series.items():
        value = crossover([(b, s) for b, s, _ in pts])
        if value is None:
            continue
        label = f"crossover_batch.{name}"
        if len(by_drafter[name]) > 1:
            label += "." + ".".join(v for k, v in _differing(ident, by_drafter[name]))
        out[label] = value
        if any(ci for _, _, ci in pts):
            for suffix, sign in (("_lo", -1), ("_hi", 1)):
                bound = crossover([(b, s + sign * ci) for b, s, ci in pts])
                if bound is not None:
                    out[label + suffix] = bound
    return out


def _differing(ident: tuple, others: list[tuple]) -> list[tuple[str, str]]:
    keys = {k for other in others for k, v in other if (k, v) not in ident} | {
        k for k, v in ident if any((k, v) not in other for other in others)
    }
    return [(k, v) for k, v in ident if k in keys]


def apply(rows: Sequence[PointResult]) -> tuple[dict[int, dict[str, float]], dict[str, float]]:
    """Pair every point with its baseline, merge ``speedup``/``decode_speedup`` into its metrics
    (replacing any logged earlier) and compute the crossovers."""
    for row in rows:
        row.metrics.pop("speedup", None)
        row.metrics.pop("decode_speedup", None)
    speedups = pair_speedups(rows)
    for i, ratios in speedups.items():
        rows[i].metrics |= ratios
    return speedups, crossovers(rows, speedups)
