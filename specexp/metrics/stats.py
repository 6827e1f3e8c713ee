"""Statistics over repeated measurements, one interval engine for all of them: every estimate is a
sampling distribution, its 95% interval is that distribution's 2.5% and 97.5% quantiles, and every
decision made on it (a verdict's class, a break-even's interval) reads the same distribution, drawn
on the same quantile grid.

Three kinds of estimate, each saying how its interval is made:

- ``linear``: a mean of independent samples (windows, launches) with a Student-t interval,
  ``value ± t(0.975, df) · se``; exact quantiles from scipy. A point is measured in a handful of
  windows, and a normal interval (or a bootstrap, which has ten distinct means to draw from three
  windows) would be too narrow exactly when the verdict needs to be careful.
- ``log``: a positive quantity (a ratio of two arms, a rate) whose Student-t interval is made on
  log(value), ``exp(log value ± t · se)``: asymmetric, and never below 0. ``se`` is on the log scale.
- ``log`` also holds a ratio of sums over windows (``ratio_of_sums``: tokens over seconds), its
  se from the ratio estimator's residuals, and the ratio of two arms' such sums (``arm_ratio``: every
  speedup's one estimand), paired over windows that took turns or unpaired (Welch).
- ``logit``: a mean of fractions (an acceptance rate per window) whose Student-t interval is made on
  logit(value) (the delta method: se / (p (1 − p))): never outside [0, 1]. ``se`` is on that scale.
- ``proportion``: ``value`` = k / n over ``n`` trials (``df`` holds n), with the Clopper-Pearson
  (exact binomial) interval: never outside [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
from scipy import special, stats

LEVEL = 0.95
TAIL = (1 - LEVEL) / 2  # 0.025
# Each estimate's distribution is drawn as its quantiles at k / (DRAWS + 1), k = 1..DRAWS: with DRAWS + 1 a
# multiple of 40, the TAIL_COUNT-th smallest draw is exactly the 2.5% quantile (and the TAIL_COUNT-th
# largest the 97.5% one), so a class decided on the draws and the interval printed agree.
DRAWS = 3999


def tail_count(draws: int, family: int = 1) -> int:
    """How many draws make a 2.5% tail (2.5% / ``family`` for a class or a bound that holds jointly with
    ``family`` − 1 others: Bonferroni's simultaneous intervals): fewer draws than this below 1 and a
    point "pays"."""
    return math.ceil(TAIL / family * draws - 1e-9)


@lru_cache(maxsize=8)
def grid(draws: int = DRAWS) -> np.ndarray:
    """The probabilities an estimate is drawn at (sorted; read-only)."""
    probabilities = np.arange(1, draws + 1) / (draws + 1)
    probabilities.flags.writeable = False
    return probabilities


# A bounded estimate's interval is made on a scale where it is unbounded, and mapped back: (to, back).
SCALES = {"log": (np.log, np.exp), "logit": (special.logit, special.expit)}


def t975(df: float) -> float:
    """The exact 97.5% Student-t quantile (fractional degrees of freedom allowed)."""
    return float(special.stdtrit(df, 1 - TAIL))


@dataclass(frozen=True)
class Estimate:
    """An estimate and its sampling distribution (module doc); ``df`` = 0 means one measurement and
    no interval. For a ``proportion``, ``df`` is the number of trials."""

    value: float
    se: float = 0.0
    df: float = 0.0
    scale: str = "linear"  # linear | log | logit | proportion

    @property
    def known(self) -> bool:
        """Whether there is an interval at all."""
        return self.df > 0

    def quantiles(self, p: np.ndarray) -> np.ndarray:
        """The sampling distribution's quantiles at probabilities ``p``."""
        p = np.asarray(p, dtype=float)
        if not self.known:
            return np.full(p.shape, self.value)
        if self.scale == "proportion":
            return _clopper_pearson(round(self.value * self.df), int(self.df), p)
        if self.se == 0:
            return np.full(p.shape, self.value)
        if self.scale in SCALES:
            to, back = SCALES[self.scale]
            with np.errstate(over="ignore"):
                return back(to(self.value) + self.se * special.stdtrit(self.df, p))
        return self.value + self.se * special.stdtrit(self.df, p)  # scipy.stats.t.ppf without its overhead

    @cached_property
    def _bounds(self) -> tuple[float, float]:
        lo, hi = self.quantiles(np.array([TAIL, 1 - TAIL]))
        return float(lo), float(hi)

    @property
    def lo(self) -> float:
        """The 95% interval's lower end (the distribution's 2.5% quantile)."""
        return self._bounds[0]

    @property
    def hi(self) -> float:
        return self._bounds[1]

    @property
    def half(self) -> float:
        """The 95% half-width: ``t · se`` for a linear estimate, (hi − lo) / 2 for the others (whose
        interval is asymmetric: read ``lo`` and ``hi``)."""
        return (self.hi - self.lo) / 2 if self.known else 0.0

    def draws(self, rng: np.random.Generator, n: int = DRAWS) -> np.ndarray:
        """``n`` values of the sampling distribution: its quantiles on the grid, in random order (a
        Latin hypercube: every draw of one estimate is independent of every other estimate's)."""
        return rng.permutation(on_grid(self, n))


@lru_cache(maxsize=4096)
def on_grid(est: Estimate, draws: int = DRAWS) -> np.ndarray:
    """The estimate's quantiles on the grid, sorted (read-only: its draws and its class share them)."""
    values = est.quantiles(grid(draws))
    values.flags.writeable = False
    return values


def _clopper_pearson(k: int, n: int, p: np.ndarray) -> np.ndarray:
    """Quantiles of the Clopper-Pearson confidence distribution of k successes in n trials: below the
    median Beta(k, n − k + 1) (0 when k = 0), above it Beta(k + 1, n − k) (1 when k = n); its 2.5% and
    97.5% quantiles are the exact binomial interval (scipy.stats.binomtest(k, n).proportion_ci())."""
    low = np.zeros(p.shape) if k == 0 else stats.beta.ppf(p, k, n - k + 1)
    high = np.ones(p.shape) if k == n else stats.beta.ppf(p, k + 1, n - k)
    return np.where(p < 0.5, low, high)


def estimate(samples: Sequence[float]) -> Estimate:
    """The mean of independent samples (windows, launches) and its standard error."""
    arr = np.asarray(samples, dtype=float)
    if arr.size < 2:
        return Estimate(float(arr.mean()))
    spread = 0.0 if np.ptp(arr) == 0 else float(arr.std(ddof=1))  # equal samples: exactly no spread
    return Estimate(float(arr.mean()), spread / math.sqrt(arr.size), arr.size - 1)


def positive(samples: Sequence[float]) -> Estimate:
    """The mean of non-negative samples (a rate: goodput) with its interval on the log scale (the
    delta method: se / mean), so that it never reaches below 0; an all-zero mean is exactly 0."""
    est = estimate(samples)
    if not est.known or est.value <= 0:
        return Estimate(est.value, 0.0, est.df)
    return Estimate(est.value, est.se / est.value, est.df, "log")


def fraction(samples: Sequence[float]) -> Estimate:
    """The mean of fractions in [0, 1] (a window's acceptance rate) with its interval on the logit scale,
    so that it never leaves [0, 1]; a mean of exactly 0 or 1 (every window so) has no spread."""
    est = estimate(samples)
    if not est.known or not 0 < est.value < 1:
        return Estimate(est.value, 0.0, est.df)
    return Estimate(est.value, est.se / (est.value * (1 - est.value)), est.df, "logit")


def proportion(successes: int, trials: int) -> Estimate:
    """successes / trials with its Clopper-Pearson interval."""
    if trials <= 0:
        return Estimate(math.nan)
    return Estimate(successes / trials, 0.0, trials, "proportion")


def _relative_residuals(num: Sequence[float], den: Sequence[float]) -> tuple[float, np.ndarray]:
    """Σ num / Σ den, and each window's residual num_i − R · den_i relative to R · mean(den): the
    window's share of the error of log R to first order (they sum to 0)."""
    y, x = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    value = float(y.sum() / x.sum())
    if not value > 0 or not math.isfinite(value):
        return value, np.zeros(y.size)
    return value, (y - value * x) / (value * float(x.mean()))


def ratio_of_sums(num: Sequence[float], den: Sequence[float]) -> Estimate:
    """Σ num / Σ den over independent windows (a rate pooled over its windows: tokens over seconds),
    with the ratio estimator's interval across the windows: its standard error from the residuals
    num_i − R · den_i, se(R) = √(Σ residual² / (n (n − 1))) / mean(den), taken relative to R and made
    on the log scale with n − 1 degrees of freedom, so that it never reaches below 0."""
    value, rel = _relative_residuals(num, den)
    n = rel.size
    if n < 2 or not value > 0 or not math.isfinite(value):
        return Estimate(value)
    return Estimate(value, math.sqrt(float(np.sum(rel**2)) / (n * (n - 1))), n - 1, "log")


Sums = tuple[Sequence[float], Sequence[float]]  # one arm's windows: (numerators, denominators)


def arm_ratio(a: Sums, b: Sums, paired: bool) -> Estimate:
    """The one estimand of every ratio between two arms (a speedup; docs/METRICS.md): arm A's Σ num /
    Σ den over its windows (output tokens over window seconds) divided by arm B's, its interval on the
    log scale. ``paired`` (the arms' windows took turns, window i of each beside window i of the other):
    Student-t over the pairs' differences of relative residuals (``_relative_residuals``), pairs − 1
    degrees of freedom, so that the drift partners share cancels. Unpaired: the arms' residual
    variances added, Welch-Satterthwaite's degrees of freedom. The value is the same either way; only
    the interval says whether the windows were paired."""
    ra, u = _relative_residuals(*a)
    rb, v = _relative_residuals(*b)
    value = ra / rb if rb else math.nan
    if not value > 0 or not math.isfinite(value):
        return Estimate(value)
    if paired:
        if u.size != v.size:
            raise ValueError(f"paired arms need as many windows each, not {u.size} and {v.size}")
        diff = estimate(u - v)
        return Estimate(value, diff.se, diff.df, "log") if diff.known else Estimate(value)
    parts = [(float(np.var(r, ddof=1)) / r.size, r.size - 1) for r in (u, v) if r.size >= 2]
    if len(parts) < 2:
        return Estimate(value)
    rel2 = sum(p for p, _ in parts)
    if rel2 == 0:
        return Estimate(value, 0.0, sum(df for _, df in parts), "log")
    df = rel2**2 / sum(p**2 / df for p, df in parts if p > 0)
    return Estimate(value, math.sqrt(rel2), df, "log")


def from_interval(value: float, half: float | None, n: int) -> Estimate:
    """A linear estimate back from what a point records: its mean, 95% half-width and sample count."""
    if half is None or n < 2:
        return Estimate(value)
    return Estimate(value, half / t975(n - 1), n - 1)


def from_bounds(value: float, lo: float | None, hi: float | None, df: float, scale: str = "log") -> Estimate:
    """A log- (or logit-) scale estimate back from its recorded value, 95% bounds and degrees of freedom."""
    if lo is None or hi is None or df <= 0 or value <= 0 or lo <= 0 or (scale == "logit" and hi >= 1):
        return Estimate(value)
    to, _ = SCALES[scale]
    return Estimate(value, float(to(hi) - to(lo)) / (2 * t975(df)), df, scale)


def _log_se(e: Estimate) -> float:
    """An estimate's standard error relative to its value (its se on the log scale)."""
    if e.scale == "log":
        return e.se
    return e.se / abs(e.value) if e.value else 0.0


def ratio(num: Estimate, den: Estimate) -> Estimate:
    """num / den for independent estimates (unpaired), on the log scale: relative errors add in
    quadrature (first order) and the degrees of freedom are Welch-Satterthwaite's."""
    value = num.value / den.value
    parts = [_log_se(e) ** 2 for e in (num, den)]
    rel2 = sum(parts)
    if rel2 == 0 or value <= 0:
        return Estimate(value)
    df = rel2**2 / sum(p**2 / e.df for p, e in zip(parts, (num, den), strict=True) if p > 0)
    return Estimate(value, math.sqrt(rel2), df, "log")


def combine(parts: Sequence[Estimate]) -> Estimate:
    """One point measured on several server launches. Proportions pool their trials. Otherwise the
    mean of the launches' means (on their scale for log and logit estimates): its interval comes from
    the spread between launches, and is never narrower than the windows within the launches allow."""
    if len(parts) == 1:
        return parts[0]
    if all(p.scale == "proportion" for p in parts):
        return proportion(sum(round(p.value * p.df) for p in parts), int(sum(p.df for p in parts)))
    scale = parts[0].scale
    if scale not in SCALES or any(
        p.scale != scale or p.value <= 0 or (scale == "logit" and p.value >= 1) for p in parts
    ):
        scale = "linear"
    to, back = SCALES.get(scale, (float, float))
    between = estimate([float(to(p.value)) for p in parts])
    within_se = math.sqrt(sum(p.se**2 for p in parts)) / len(parts)
    centre, se, df = between.value, between.se, between.df
    if within_se > between.se:
        se, df = within_se, sum(p.df for p in parts)
    return Estimate(float(back(centre)), se, df, scale)


def side(est: Estimate, level: float = 1.0, draws: int = DRAWS, family: int = 1) -> int:
    """Where the estimate lies against ``level``, decided on its draws: +1 when fewer than a 2.5% tail
    of them fall below it (the 95% interval lies at or above), -1 when fewer than that reach it (the
    interval lies below), 0 otherwise. With ``family`` > 1 the tail is 2.5% / family, so that the
    classes of ``family`` points hold jointly at 95% (Bonferroni). The break-even interval reads these
    same draws."""
    values = on_grid(est, draws)
    tail = tail_count(draws, family)
    below = int(np.count_nonzero(values < level))
    if below < tail:
        return 1
    return -1 if draws - below < tail else 0


def interval_keys(key: str, est: Estimate) -> dict[str, float]:
    """An estimate as a run records it: ``<key>``, and where there is an interval ``<key>_ci95`` (half
    its width) and, for an asymmetric one (log, proportion), its bounds ``<key>_lo`` / ``<key>_hi``."""
    out = {key: est.value}
    if est.known:
        out[f"{key}_ci95"] = est.half
        if est.scale != "linear":
            out |= {f"{key}_lo": est.lo, f"{key}_hi": est.hi}
    return out
