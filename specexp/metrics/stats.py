"""Statistics over repeated measurements of one point: means with 95% intervals.

Counts (metrics whose registry aggregation is "sum") add up; every other metric is averaged.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specexp.metrics.registry import lookup

# Two-sided 95% Student-t quantiles by degrees of freedom; 1.96 beyond the table.
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    25: 2.060,
    30: 2.042,
}


def t95(df: int) -> float:
    """The 97.5% t quantile for ``df`` degrees of freedom (conservative between table rows)."""
    return next((_T95[d] for d in sorted(_T95) if d >= df), 1.96) if df <= 30 else 1.96


def mean_ci(samples: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (0 for a single sample)."""
    arr = np.asarray(samples, dtype=float)
    if arr.size < 2:
        return float(arr.mean()), 0.0
    return float(arr.mean()), t95(arr.size - 1) * float(arr.std(ddof=1)) / np.sqrt(arr.size)


def aggregate_repeats(repeats: Sequence[dict[str, float]]) -> dict[str, float]:
    """One point measured N times: counts summed; every other key its mean, plus ``<key>_ci95``
    (the 95% half-width) and ``<key>_std`` over the repeats."""
    out: dict[str, float] = {"repeats": len(repeats)}
    keys = set().union(*repeats)
    for key in sorted(keys):
        values = [r[key] for r in repeats if key in r]
        metric = lookup(key)
        if metric is not None and metric.aggregate == "sum":  # per-category counts too
            out[key] = float(sum(values))
            continue
        mean, half = mean_ci(values)
        out[key] = mean
        if len(values) > 1:
            out[f"{key}_ci95"] = half
            out[f"{key}_std"] = float(np.std(values, ddof=1))
    return out
