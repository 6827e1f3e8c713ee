"""A point measured in consecutive windows on one server launch: warm-up, when to stop, the result.

Pure functions over per-window values. Warm-up is checked, not assumed: a leading window whose
throughput lies outside the 95% prediction interval of the windows after it is still part of the
server's warm-up (caches, allocator, clocks settling) and is discarded, and counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specexp.config import MeasureConfig
from specexp.metrics.registry import lookup
from specexp.metrics.stats import estimate, t95

TREND_KEY = "output_throughput"  # the window metric warm-up and precision are judged on


def outlying(first: float, rest: Sequence[float]) -> bool:
    """Whether ``first`` lies outside the 95% prediction interval of ``rest`` (which needs two values)."""
    if len(rest) < 2:
        return False
    arr = np.asarray(rest, dtype=float)
    spread = t95(arr.size - 1) * float(arr.std(ddof=1)) * math.sqrt(1 + 1 / arr.size)
    return abs(first - float(arr.mean())) > spread


def warmup_windows(values: Sequence[float], keep: int = 2) -> int:
    """How many leading windows are still warming up: each, in turn, lies outside the prediction
    interval of the windows after it. At least ``keep`` windows stay."""
    cut = 0
    while len(values) - cut > keep and outlying(values[cut], values[cut + 1 :]):
        cut += 1
    return cut


def rel_half_width(values: Sequence[float]) -> float:
    """The 95% half-width of the mean of ``values`` relative to the mean (inf below two values)."""
    est = estimate(values)
    return est.half / abs(est.value) if est.known and est.value else math.inf


def enough(values: Sequence[float], measure: MeasureConfig) -> bool:
    """Whether the windows so far hold ``measure.windows`` steady ones (and, with ``measure.rel_ci``,
    whether those are that precise)."""
    steady = values[warmup_windows(values) :]
    if len(steady) < measure.windows:
        return False
    return measure.rel_ci is None or rel_half_width(steady) <= measure.rel_ci


def more_windows(values: Sequence[float], measure: MeasureConfig, elapsed_s: float) -> bool:
    """Whether to measure another window: until enough, unless a cap is reached."""
    if len(values) >= measure.max_windows or (measure.max_s is not None and elapsed_s >= measure.max_s):
        return False
    return not enough(values, measure)


def aggregate(windows: Sequence[dict[str, float]], measure: MeasureConfig) -> dict[str, float]:
    """A point's metrics from its steady windows: counts summed, every other key the mean over
    windows with ``<key>_ci95`` (the 95% half-width, from two windows on). ``windows`` (steady),
    ``windows_warmup`` (discarded) and ``windows_settled`` (0 when a cap stopped the point before
    it had ``measure.windows`` steady windows: still warming up) say how the point was measured. A
    precision target missed is no doubt about the point: its interval is just wider."""
    warmup = warmup_windows([w.get(TREND_KEY, 0.0) for w in windows])
    steady = windows[warmup:]
    out: dict[str, float] = {
        "windows": len(steady),
        "windows_warmup": warmup,
        "windows_settled": float(len(steady) >= measure.windows),
    }
    for key in sorted(set().union(*steady)):
        values = [w[key] for w in steady if key in w]
        metric = lookup(key)
        if metric is not None and metric.aggregate == "sum":  # counts, per-category ones too
            out[key] = float(sum(values))
            continue
        est = estimate(values)
        out[key] = est.value
        if est.known:
            out[f"{key}_ci95"] = est.half
    return out
