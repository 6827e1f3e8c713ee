"""Statistics over repeated measurements: means with 95% Student-t intervals, ratios of them, and
launches of one point combined.

Intervals are Student-t: a point is measured in a handful of windows, and a normal interval (or a
plain bootstrap, which has only ten distinct means to draw from three windows) would be too narrow
exactly when the verdict needs to be careful.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

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


@dataclass(frozen=True)
class Estimate:
    """``value`` ± ``half`` (95%); ``df`` = 0 means one measurement and no interval."""

    value: float
    se: float = 0.0
    df: float = 0.0

    @property
    def known(self) -> bool:
        """Whether there is an interval at all."""
        return self.df > 0

    @property
    def half(self) -> float:
        """The 95% half-width (degrees of freedom rounded down: the wider interval)."""
        return t95(max(1, math.floor(self.df))) * self.se if self.known else 0.0

    @property
    def lo(self) -> float:
        return self.value - self.half

    @property
    def hi(self) -> float:
        return self.value + self.half

    def draws(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` values from the estimate's sampling distribution (Student-t; constant without an interval)."""
        if not self.known or self.se == 0:
            return np.full(n, self.value)
        return self.value + self.se * rng.standard_t(self.df, n)


def estimate(samples: Sequence[float]) -> Estimate:
    """The mean of independent samples (windows, launches) and its standard error."""
    arr = np.asarray(samples, dtype=float)
    if arr.size < 2:
        return Estimate(float(arr.mean()))
    spread = 0.0 if np.ptp(arr) == 0 else float(arr.std(ddof=1))  # equal samples: exactly no spread
    return Estimate(float(arr.mean()), spread / math.sqrt(arr.size), arr.size - 1)


def from_interval(value: float, half: float | None, n: int) -> Estimate:
    """An estimate back from what a point records: its mean, 95% half-width and sample count."""
    if half is None or n < 2:
        return Estimate(value)
    return Estimate(value, half / t95(n - 1), n - 1)


def ratio(num: Estimate, den: Estimate) -> Estimate:
    """num / den for independent estimates: relative errors add in quadrature (first order) and
    the degrees of freedom are Welch-Satterthwaite's."""
    value = num.value / den.value
    parts = [(e.se / e.value) ** 2 if e.value else 0.0 for e in (num, den)]
    rel2 = sum(parts)
    if rel2 == 0:
        return Estimate(value)
    df = rel2**2 / sum(p**2 / e.df for p, e in zip(parts, (num, den), strict=True) if p > 0)
    return Estimate(value, abs(value) * math.sqrt(rel2), df)


def combine(parts: Sequence[Estimate]) -> Estimate:
    """One point measured on several server launches: the mean of the launches' means. Its
    interval comes from the spread between launches, and is never narrower than the windows
    within the launches allow."""
    if len(parts) == 1:
        return parts[0]
    between = estimate([p.value for p in parts])
    within_se = math.sqrt(sum(p.se**2 for p in parts)) / len(parts)
    if within_se > between.se:
        return Estimate(between.value, within_se, sum(p.df for p in parts))
    return between
