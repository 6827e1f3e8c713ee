"""What a design can tell, and when a point may stop early without losing its 95%.

Power: the smallest speedup difference ``n`` window pairs detect at the spread they show (or, before
anything is measured, at an assumed spread), from scipy's Student-t: a two-sided test at 95% that
finds a true log ratio of ``(t(0.975, n − 1) + t(power, n − 1)) · sd / √n`` with probability ``power``.

Stopping: with ``measure.rel_ci`` a point is not checked after every window (looking at a 95%
interval after every window and stopping when it looks good misses the truth far more often than
5%) but at a few pre-declared looks: ``measure.windows`` windows, then 1.5 times as many each look,
up to ``measure.max_windows``. Each look spends a share of the 5% by Lan-DeMets' O'Brien-Fleming
spending function, ``α(t) = 2 − 2 Φ(z(0.975) / √t)`` at the information fraction ``t = n / max_windows``,
and the interval at a look is made at the level its share leaves (``widen``). By the union bound the
chance that the interval at any look misses is at most the 5% spent in all, so the interval reported
at whatever look the point stopped at still holds with at least 95%, whatever the stopping rule read
(a precision target, or whether the interval excludes 1). A cap (``measure.max_s``) that stops a point
between looks reports it at the level of the next look, whose share was never used.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy import stats

from specexp.metrics.stats import LEVEL, Estimate, t975

POWER = 0.8  # the chance of detecting a difference that is there
ASSUMED_SPREAD = 0.10  # a window pair's log-ratio standard deviation before any is measured (a busy box)
QUIET_SPREAD = 0.03  # the same on a quiet machine
GROWTH = 1.5  # each look has this many times the windows of the one before


def detectable(spread: float, n: int, power: float = POWER) -> float:
    """The smallest relative speedup difference (0.06: ×1.06 or ×0.94 against ×1) that ``n`` window pairs
    whose log ratio has standard deviation ``spread`` detect with probability ``power`` at 95% (two-sided);
    inf below two pairs."""
    if n < 2:
        return math.inf
    df = n - 1
    return math.expm1((t975(df) + float(stats.t.ppf(power, df))) * spread / math.sqrt(n))


def detectable_from(est: Estimate, power: float = POWER) -> float | None:
    """``detectable`` at the spread an estimate on the log scale shows (its se is spread / √n)."""
    if est.scale != "log" or not est.known:
        return None
    return math.expm1((t975(est.df) + float(stats.t.ppf(power, est.df))) * est.se)


def design_line(windows: int, spread: float = ASSUMED_SPREAD, quiet: float = QUIET_SPREAD) -> str:
    """What a design can tell before it measures (a dry run's plan): the smallest speedup difference
    ``windows`` window pairs detect at an assumed spread, busy and quiet."""
    busy, calm = detectable(spread, windows), detectable(quiet, windows)
    return (
        f"power: {windows} window pairs per point detect a speedup difference of {busy:.0%} at {POWER:.0%} power "
        f"(95%, two-sided) if a pair's log ratio spreads by {spread:g} (a busy machine), {calm:.0%} at {quiet:g} "
        "(a quiet one); more windows (measure.windows) detect smaller ones"
    )


def looks(windows: int, max_windows: int) -> tuple[int, ...]:
    """The window counts at which a precision target is checked: ``windows``, then GROWTH times as many
    each look (rounded up), and ``max_windows`` last."""
    out = [windows]
    while out[-1] < max_windows:
        out.append(min(max_windows, math.ceil(out[-1] * GROWTH)))
    return tuple(out)


def spent(fraction: float, alpha: float = 1 - LEVEL) -> float:
    """Lan-DeMets' O'Brien-Fleming spending function: the error spent by the information ``fraction``."""
    if fraction <= 0:
        return 0.0
    return float(2 - 2 * stats.norm.cdf(stats.norm.ppf(1 - alpha / 2) / math.sqrt(min(fraction, 1.0))))


def look_alphas(schedule: tuple[int, ...]) -> tuple[float, ...]:
    """Each look's share of the error: the spending function's increments (they sum to 5%)."""
    spending = [spent(n / schedule[-1]) for n in schedule]
    return tuple(np.diff([0.0, *spending]).tolist())


def alpha_at(n: int, windows: int, max_windows: int) -> float:
    """The error the interval of a point stopped at ``n`` windows is made at: the share of the first
    look at or after ``n``."""
    schedule = looks(windows, max_windows)
    k = next((i for i, m in enumerate(schedule) if m >= n), len(schedule) - 1)
    return look_alphas(schedule)[k]


def widen(est: Estimate, alpha: float) -> Estimate:
    """The estimate whose 95% interval is ``est``'s (1 − alpha) interval (its se scaled by the ratio of
    the two Student-t quantiles): classes and break-evens read it as they read any other."""
    if not est.known or est.scale == "proportion" or est.se == 0:
        return est
    factor = float(stats.t.ppf(1 - alpha / 2, est.df)) / t975(est.df)
    return replace(est, se=est.se * factor)


def stop(est: Estimate, n: int, windows: int, max_windows: int, rel_ci: float) -> bool:
    """Whether a point measured in ``n`` windows, whose target estimate (a speedup ratio, or one arm's
    throughput) is ``est``, may stop: ``n`` is a look, and the estimate's interval at that look's level
    is no wider than ± ``rel_ci`` of its value (half its width over the value)."""
    schedule = looks(windows, max_windows)
    if n not in schedule:
        return False
    at = widen(est, look_alphas(schedule)[schedule.index(n)])
    return at.known and at.value != 0 and at.half / abs(at.value) <= rel_ci
