"""A point measured in consecutive windows on one server launch: when to stop, and the result.

Pure functions over per-window values. Warm-up is a stated phase, not a guess: before its first
measured window a point runs ``workload.warmup`` requests and then ``measure.warmup_windows`` whole
windows at its own load (same batch or rate, fresh prompts), and discards them (specexp.point). Every
measured window counts: none is dropped after the fact for looking unlike the others, which could
narrow an interval by throwing away the evidence against it.
"""

from __future__ import annotations

from collections.abc import Sequence

from specexp.config import MeasureConfig
from specexp.metrics import sequential
from specexp.metrics.registry import lookup
from specexp.metrics.requests import pooled_throughput
from specexp.metrics.stats import (
    Estimate,
    Sums,
    arm_ratio,
    estimate,
    fraction,
    interval_keys,
    positive,
    proportion,
    ratio_of_sums,
)

TREND_KEY = "output_throughput"  # the window metric precision is judged on (its speedup, where arms take turns)
# Per-window bookkeeping (each window's start and end, epoch seconds): kept in the windows, not a metric.
WINDOW_TIMES = ("window_start", "window_end")
RATES = ("goodput",)  # non-negative rates: intervals on the log scale (stats.positive)
# Fractions in [0, 1] averaged over windows: intervals on the logit scale (stats.fraction).
FRACTIONS = ("accept_rate", "accept_rate_pos", "client_burst_share", "host_cpu_steal")
# Positive quantities: intervals on the log scale; every key of these units, and these unitless ones.
POSITIVE_UNITS = ("tok/s", "req/s", "ms", "s", "count")
POSITIVE = (*RATES, "accept_length", "tokens_per_chunk_mean", "host_load1", "client_cpu", "client_server_gap")
# Ratios of sums: key -> (numerator, denominator), each window's sums (stats.ratio_of_sums).
POOLED = {"decode_speed": ("decode_tokens", "decode_s"), "completion_rate": ("completions", "completion_s")}


def scale_of(key: str) -> str:
    """How a window-averaged key's interval is made, so that it never leaves the key's range: ``logit``
    for a fraction (FRACTIONS), ``log`` for a positive quantity (a latency, a rate, a length: its unit
    in POSITIVE_UNITS, or one of POSITIVE), ``linear`` for the rest."""
    metric = lookup(key)
    if metric is None:
        return "linear"
    if metric.key in FRACTIONS:
        return "logit"
    if metric.unit in POSITIVE_UNITS or metric.key in POSITIVE:
        return "log"
    return "linear"


def window_estimate(key: str, values: Sequence[float]) -> Estimate:
    """The mean of a key's window values with its interval on the key's scale (``scale_of``)."""
    return {"logit": fraction, "log": positive, "linear": estimate}[scale_of(key)](values)


def enough(values: Sequence[float], measure: MeasureConfig) -> bool:
    """Whether the windows so far are ``measure.windows`` (and, with ``measure.rel_ci``, whether at one of
    the pre-declared looks their interval, made at that look's share of the 5%, is that precise:
    specexp.metrics.sequential). A point's own rule, on its own output throughput: arms taking turns
    with a baseline stop together on their speedups instead (``speedups_precise``,
    specexp.metrics.joint_stop)."""
    if len(values) < measure.windows:
        return False
    if measure.rel_ci is None:
        return True
    est = window_estimate(TREND_KEY, values)
    return sequential.stop(est, len(values), measure.windows, measure.max_windows, measure.rel_ci)


def more_windows(values: Sequence[float], measure: MeasureConfig, elapsed_s: float) -> bool:
    """Whether to measure another window: until enough, unless a cap is reached."""
    if len(values) >= measure.max_windows or (measure.max_s is not None and elapsed_s >= measure.max_s):
        return False
    return not enough(values, measure)


# The one estimand of every ratio (docs/METRICS.md, "One speedup"): each arm's windows pooled, Σ metric ·
# weight / Σ weight (for output throughput: its output tokens over its window seconds), A's over B's.
WEIGHTS = {
    "output_throughput": "window_s",
    "decode_speed": "decode_s",
    "goodput": "window_s",
    "ttft_ms_mean": "requests_ok",
    "tpot_ms_mean": "requests_ok",
}


def window_sums(windows: Sequence[dict[str, float]], metric: str) -> Sums | None:
    """Each window's numerator (metric × weight: its output tokens) and denominator (WEIGHTS: its
    seconds); a window without the metric counts for nothing (0, 0). None when a window has the metric
    without its weight (recorded before weights were) or no window has it."""
    weight = WEIGHTS[metric]
    nums, dens = [], []
    for w in windows:
        value, size = w.get(metric), w.get(weight)
        if value is not None and size is None:
            return None
        ok = value is not None and size is not None and size > 0
        nums.append(float(value) * float(size) if ok else 0.0)  # type: ignore[arg-type]
        dens.append(float(size) if ok else 0.0)  # type: ignore[arg-type]
    return (nums, dens) if sum(dens) > 0 else None


def speedups_precise(
    base: Sequence[dict[str, float]], arms: Sequence[Sequence[dict[str, float]]], measure: MeasureConfig
) -> bool:
    """Whether arms whose windows took turns with the baseline's (``base``: n windows, each arm at
    least as many) may stop at n: n is a look, and every arm's speedup over the n window pairs (the
    one estimand, stats.arm_ratio, paired), made at that look's level, is within ± ``measure.rel_ci``
    (sequential.stop). An arm without its sums (no tokens) is not precise."""
    n = len(base)
    b = window_sums(base, TREND_KEY)
    if measure.rel_ci is None or b is None:
        return False
    for windows in arms:
        a = window_sums(windows[:n], TREND_KEY)
        if a is None or len(a[0]) != n:
            return False
        est = arm_ratio(a, b, paired=True)
        if not sequential.stop(est, n, measure.windows, measure.max_windows, measure.rel_ci):
            return False
    return True


def saturated(point: dict[str, float]) -> dict[str, float]:
    """``saturated``: 1 when the completions fell behind the arrivals, the completion rate's whole 95%
    interval below the offered rate; 0 when the interval does not show it; absent without an interval."""
    if "completion_rate_hi" not in point or "offered_rate" not in point:
        return {}
    return {"saturated": float(point["completion_rate_hi"] < point["offered_rate"])}


def aggregate(windows: Sequence[dict[str, float]], measure: MeasureConfig) -> dict[str, float]:
    """A point's metrics from its measured windows: counts summed, ``slo_attainment`` over the requests
    (Clopper-Pearson), every other key the mean over windows with ``<key>_ci95`` (the 95% half-width,
    from two windows on; rates also with bounds on the log scale, ``<key>_lo`` / ``<key>_hi``).
    ``windows`` (measured), ``windows_warmup`` (measured windows discarded: 0, the warm-up is a
    phase before them) and ``windows_settled`` (0 when a cap stopped the point before it had
    ``measure.windows`` windows) say how the point was measured. A precision target missed is no
    doubt about the point: its interval is just wider. ``output_throughput_pooled`` is the windows'
    tokens over their seconds together (a point's rate whatever its windows' lengths); ``decode_speed``
    likewise its windows' decode tokens over their decode seconds (POOLED), with the ratio
    estimator's interval over the windows. With ``measure.rel_ci`` every interval is made at the level
    of the look the point stopped at (specexp.metrics.sequential), so that stopping early keeps 95%."""
    alpha = None if measure.rel_ci is None else sequential.alpha_at(len(windows), measure.windows, measure.max_windows)

    def at_look(est: Estimate) -> Estimate:  # a point that stopped on a precision target: its look's level
        return est if alpha is None else sequential.widen(est, alpha)

    out: dict[str, float] = {
        "windows": len(windows),
        "windows_warmup": 0,
        "windows_settled": float(len(windows) >= measure.windows),
    }
    for key in sorted(set().union(*windows) - set(WINDOW_TIMES)):
        values = [w[key] for w in windows if key in w]
        metric = lookup(key)
        if metric is not None and metric.aggregate == "sum":  # counts, per-category ones too
            out[key] = float(sum(values))
            continue
        out |= interval_keys(key, at_look(window_estimate(key, values)))
    for key, (num, den) in POOLED.items():
        parts = [(w[num], w[den]) for w in windows if w.get(den, 0.0) > 0]
        if parts:
            out |= interval_keys(key, at_look(ratio_of_sums(*zip(*parts, strict=True))))
    out |= saturated(out)
    if "slo_met" in out:
        trials = out.get("requests_ok", 0.0) + out.get("requests_failed", 0.0)
        out |= interval_keys("slo_attainment", proportion(int(out["slo_met"]), int(trials)))
    return out | pooled_throughput(windows)
