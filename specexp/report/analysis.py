"""Sweep-level analysis (METRICS.md "Sweep level"): pairing with baselines, speedups and crossovers
with 95% intervals, and the points that break their curve.

Pure functions over the points of a sweep (specexp.result.PointResult): their flattened params
(``engine.name``, ``drafter.name``, ``batch``, ``repeat``, ...), metrics (a mean, ``<key>_ci95``
and ``windows``) and per-window metrics. A series of points varies one load axis: the batch (closed
loop) or the request rate (open loop); crossovers are read along it. A point measured on several
server launches (``repeats``) has one result per launch.

Every speedup and ratio is one estimand, whatever the windows (WEIGHTS, stats.arm_ratio): each arm's
windows pooled (output tokens over window seconds), A's over B's. Only its interval depends on the
windows: paired when the two arms' windows took turns (A0 B0 A1 B1, specexp.sweep.turns: each window
and its partner share the machine's state), Student-t over the pairs; otherwise (arms one after the
other, windows without times) unpaired, Welch. Every point records both intervals and says which it
used (METHOD_TAG, ``windows_paired``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from specexp.config import SloConfig
from specexp.metrics import sequential
from specexp.metrics.stats import (
    Estimate,
    arm_ratio,
    combine,
    from_bounds,
    from_interval,
    interval_keys,
    proportion,
    ratio,
)
from specexp.metrics.window_results import WEIGHTS, scale_of, window_sums
from specexp.report.contention import client_bound, host_load
from specexp.report.crossing import (
    breaks_trend,
    crossing_bounds,
    crossing_draws,
    crossover,
    crossover_interval,
    first_crossings,
)
from specexp.report.distinguish import distinguishing
from specexp.report.summary import METHOD_TAG
from specexp.result import PointResult

# Params that differ between points of one sweep without making them different experiments.
_NOT_IDENTITY = ("sweep_id", "run_name", "max_batch", "dry_run", "repeat", "measure.", "tracking.")
# A speculative point's ratios to its baseline, by load kind: (key, the metric divided). A rate point
# carries no output-throughput speedup: below saturation both arms carry the offered rate, and the
# ratio would say how soon the last request ended, not capacity; there speculation shows in per-stream
# speed, goodput and latency at the same offered rate.
RATIOS = {
    "closed": (("speedup", "output_throughput"), ("decode_speedup", "decode_speed"), ("goodput_ratio", "goodput")),
    "rate": (
        ("decode_speedup", "decode_speed"),
        ("goodput_ratio", "goodput"),
        ("ttft_ratio", "ttft_ms_mean"),
        ("tpot_ratio", "tpot_ms_mean"),
    ),
}
RATIO_KEYS = tuple(dict.fromkeys(key for pairs in RATIOS.values() for key, _ in pairs))


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
    """A point's metric as it was measured: the mean over its windows with their interval; a
    proportion (``slo_attainment``) over its requests; a rate recorded with bounds on the log scale."""
    metrics = row.metrics
    if metrics.get(key) is None:
        return None
    if key == "slo_attainment" and "slo_met" in metrics:
        return proportion(int(metrics["slo_met"]), int(requests_of(metrics)))
    windows = int(metrics.get("windows", 1))
    if f"{key}_lo" in metrics and f"{key}_hi" in metrics:
        scale = "logit" if scale_of(key) == "logit" else "log"
        return from_bounds(metrics[key], metrics[f"{key}_lo"], metrics[f"{key}_hi"], windows - 1, scale)
    return from_interval(metrics[key], metrics.get(f"{key}_ci95"), windows)


def requests_of(metrics: dict[str, float]) -> float:
    """The measured requests of a point, failed ones included."""
    return metrics.get("requests_ok", 0.0) + metrics.get("requests_failed", 0.0)


def alternated(a: Sequence[dict[str, float]], b: Sequence[dict[str, float]]) -> int:
    """How many leading windows of two arms took turns: n such that, merged by start time, the windows
    run one after the other without overlapping and window i of each arm lies right beside window i
    of the other for every i < n (another arm's windows may come between). 0 without window times
    (results recorded before they were)."""
    n = min(len(a), len(b))
    if any(w.get("window_start") is None or w.get("window_end") is None for w in (*a, *b)):
        return 0
    merged = sorted(
        (w["window_start"], w["window_end"], arm, i) for arm, ws in ((0, a), (1, b)) for i, w in enumerate(ws)
    )
    if any(later[0] < earlier[1] for earlier, later in itertools.pairwise(merged)):
        return 0  # windows overlapped: measured side by side at once, not in turn
    pairs = 0
    while pairs < n:
        first, second = merged[2 * pairs], merged[2 * pairs + 1]
        if {first[2], second[2]} != {0, 1} or first[3] != pairs or second[3] != pairs:
            break
        pairs += 1
    return pairs


def _recorded(row: PointResult, key: str, paired: bool) -> Estimate | None:
    """A ratio as an earlier analysis recorded it (a row read back from MLflow, without its windows):
    paired with pairs − 1 degrees of freedom; unpaired with the row's windows − 1 (at most Welch's: the
    interval read back is no narrower than the one recorded)."""
    m = row.metrics
    if m.get(key) is None or not m.get(key + "_lo"):
        return None
    df = m["windows_paired"] - 1 if paired else m.get("windows", 1) - 1
    return from_bounds(m[key], m[key + "_lo"], m.get(key + "_hi"), df)


def arms_ratio(num: PointResult, den: PointResult, metric: str, pairs: int = 0) -> tuple[Estimate, Estimate] | None:
    """``metric`` of ``num`` over that of ``den``, the one estimand where both have their windows'
    sums (WEIGHTS, stats.arm_ratio): paired over the leading ``pairs`` windows that took turns (two or
    more), else unpaired over every window; with its unpaired twin (the same value, the interval as if
    the windows had not taken turns). Without windows' sums (a metric without a weight, a percentile):
    the ratio of the two points' recorded values, unpaired. None when either lacks the metric."""
    n = pairs if pairs >= 2 else None
    if metric in WEIGHTS:
        a, b = window_sums(num.windows[:n], metric), window_sums(den.windows[:n], metric)
        if a is not None and b is not None:
            unpaired = arm_ratio(a, b, paired=False)
            return (arm_ratio(a, b, paired=True) if n else unpaired), unpaired
    top, bottom = metric_estimate(num, metric), metric_estimate(den, metric)
    if top is None or bottom is None or not bottom.value:
        return None
    return ratio(top, bottom), ratio(top, bottom)


def _number(params: dict, key: str) -> float | None:
    value = params.get(key)
    return None if value in (None, "", "None", "null") else float(value)


def look_alpha(row: PointResult, base: PointResult) -> float | None:
    """The error a ratio's interval is made at when the point stopped on a precision target
    (``measure.rel_ci``): the share of the look its arms stopped at (specexp.metrics.sequential); None
    for a fixed number of windows (5%)."""
    if _number(row.params, "measure.rel_ci") is None or not row.windows:
        return None
    windows, most = _number(row.params, "measure.windows"), _number(row.params, "measure.max_windows")
    if windows is None or most is None:
        return None
    return sequential.alpha_at(max(len(row.windows), len(base.windows)), int(windows), int(most))


def ratio_estimates(row: PointResult, base: PointResult) -> tuple[dict[str, Estimate], dict[str, Estimate], int]:
    """A speculative row's ratios to its baseline (RATIOS for its load kind), each the one estimand
    (``arms_ratio``): the estimates used (paired where two or more windows took turns), their unpaired
    twins, and the window pairs used (0: unpaired); a point that stopped on a precision target gets its
    look's level (``look_alpha``). A row without windows (read back) keeps what its analysis recorded."""
    pairs = alternated(row.windows, base.windows)
    used: dict[str, Estimate] = {}
    unpaired: dict[str, Estimate] = {}
    for key, metric in RATIOS[row.load]:
        if not row.windows and (earlier := _recorded(row, key, row.metrics.get("windows_paired", 0) >= 2)):
            used[key] = earlier
            unpaired[key] = _recorded(row, f"{key}_unpaired", False) or earlier
        elif (found := arms_ratio(row, base, metric, pairs)) is not None:
            alpha = look_alpha(row, base)
            used[key], unpaired[key] = found if alpha is None else tuple(sequential.widen(e, alpha) for e in found)
    if not row.windows and "windows_paired" in row.metrics:
        pairs = int(row.metrics["windows_paired"])
    return used, unpaired, pairs if pairs >= 2 and used else 0


def _ratios(rows: Sequence[PointResult]) -> dict[int, tuple[dict[str, Estimate], dict[str, Estimate], int]]:
    """Per speculative row with a baseline from the same launch round (launches of one round run back
    to back, so a row and its baseline share the machine's drift): ratio_estimates."""
    baselines: dict[tuple, list[PointResult]] = {}
    for r in rows:
        if not r.speculative and r.ok:
            baselines.setdefault((identity(r), launch(r)), []).append(r)
    out = {}
    for i, row in enumerate(rows):
        found = baselines.get((identity(row), launch(row)))
        if row.speculative and found and row.ok:
            # several (a study: one per trial): the one its windows took turns with, else the last
            base = max(reversed(found), key=lambda b: alternated(row.windows, b.windows))
            out[i] = ratio_estimates(row, base)
    return out


def used_ratios(rows: Sequence[PointResult]) -> dict[int, dict[str, Estimate]]:
    """Per speculative row with a baseline, the ratio estimates the verdict's series read (paired
    where the arms' windows took turns, else unpaired)."""
    return {i: used for i, (used, _, _) in _ratios(rows).items()}


def as_metrics(
    found: dict[int, tuple[dict[str, Estimate], dict[str, Estimate], int]],
) -> dict[int, dict[str, float]]:
    """Ratios as a run records them: each with its interval, its unpaired twin, and ``windows_paired``."""
    out: dict[int, dict[str, float]] = {}
    for i, (used, unpaired, pairs) in found.items():
        out[i] = {"windows_paired": float(pairs)}
        for key, est in used.items():
            out[i] |= interval_keys(key, est) | interval_keys(f"{key}_unpaired", unpaired[key])
    return out


def pair_speedups(rows: Sequence[PointResult]) -> dict[int, dict[str, float]]:
    """The ratios per speculative row, with their intervals where both were measured in more than
    one window: what each point's run records."""
    return as_metrics(_ratios(rows))


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
    host_load: dict[float, float] = field(default_factory=dict)  # x -> the host's load average per core (max)
    paired: dict[float, bool] = field(default_factory=dict)  # x -> whether its windows were paired
    # The points judged together (its trusted ones): classes and break-even hold jointly at 95% over them.
    family: int = 1
    # The first crossing's upper bound (lo is its lower one): the break-even the verdict answers with; hi,
    # the last crossing's, says how far a curve that may cross again reaches.
    first_hi: float = math.inf

    @property
    def intervals(self) -> bool:
        return any(p.known for p in self.points.values())

    @property
    def label(self) -> str:
        """``tiny``, or ``tiny (torch)`` when the drafter was measured in several settings."""
        extra = self.key.removeprefix(f"{self.axis.crossover}.{self.drafter}").lstrip(".")
        return f"{self.drafter} ({extra})" if extra else self.drafter


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
            label += "." + ".".join(v for k, v in distinguishing(ident, by_drafter[name]))
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
            mine = [r for r in rows if r.ok and identity(r, drop=AXIS_PARAMS) == ident]
            s.client_cpu = client_bound(mine, x_of)
            s.host_load = host_load(mine, x_of)
            s.paired = {x: all(rows[i].tags.get(METHOD_TAG) == "paired" for i in idx) for x, idx in places.items()}
            trusted = {x: p for x, p in points.items() if x not in s.unstable and x not in s.unsettled}
            s.family = max(1, len(trusted))
            if trusted:  # the crossover from the points that can be believed
                s.crossover = crossover([(x, p.value) for x, p in trusted.items()])
                if s.intervals:
                    s.lo, s.hi = crossing_bounds(*crossing_draws(trusted), s.family)
                    _, s.first_hi = crossing_bounds(*first_crossings(trusted), s.family)
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
    """``slo_max_rate.<drafter>`` per series of open-loop points, the baseline's included: the rate at
    which slo_attainment first falls below slo.target, with 95% bounds drawn as for crossovers (each
    attainment from its Clopper-Pearson distribution over the point's requests)."""
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


@dataclass
class Analysis:
    speedups: dict[int, dict[str, float]]  # row index -> its ratio keys, as its run records them
    series: list[Series]
    crossovers: dict[str, float]  # the parent run's keys: crossovers and SLO rates


RATIO_SUFFIXES = ("", "_ci95", "_lo", "_hi")


def apply(rows: Sequence[PointResult]) -> Analysis:
    """Pair every point with its baseline, merge its ratios (RATIOS, with their intervals, unpaired
    twins and ``windows_paired``) into its metrics (replacing any logged earlier) and the method into
    its tags (METHOD_TAG), and build the series and sweep-level keys."""
    found_ratios = _ratios(rows)  # before the old keys go: a row without windows reads them back
    for row in rows:
        row.metrics.pop("windows_paired", None)
        for key in RATIO_KEYS:
            for name in (key, f"{key}_unpaired"):
                for suffix in RATIO_SUFFIXES:
                    row.metrics.pop(name + suffix, None)
    speedups = as_metrics(found_ratios)
    for i, ratios in speedups.items():
        rows[i].metrics |= ratios
        rows[i].tags[METHOD_TAG] = "paired" if ratios["windows_paired"] >= 2 else "unpaired"
    estimates = {i: used for i, (used, _, _) in found_ratios.items()}
    found = series(rows, estimates)
    return Analysis(speedups, found, crossovers(found) | slo_rates(rows))
