"""The sweep's answer in words: per speculative drafter, where speculation pays, with the intervals
that make it safe to say; in a rate sweep also, per drafter, up to which request rate the latency
targets hold.

Conservative by construction: a batch (or rate) "pays" only when its speedup's whole 95% interval
lies at or above 1, "loses" only when it lies below; anything else is "no measurable difference".
Classes are decided on the same draws as the break-even interval (stats.side, analysis.
crossover_interval), so the two cannot contradict each other. A point that breaks its curve or never
settled is named as such instead of being believed; an inconclusive answer names the causes it can
see and the settings that narrow it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from specexp.metrics.methods import LEVEL_TEXT, ratio_method
from specexp.metrics.sequential import POWER, detectable_from, looks
from specexp.metrics.stats import LEVEL, TAIL, Estimate, side
from specexp.report.analysis import Analysis, Series, look_alpha, metric_estimate, slo_target
from specexp.result import PointResult

PAYS, LOSES, SAME = "pays", "loses", "same"


def _keys(cross: dict[str, float], stem: str, name: str) -> list[str]:
    """The sweep-level keys of one drafter (one per series), without their bounds."""
    return [
        k
        for k in cross
        if (k == f"{stem}.{name}" or k.startswith(f"{stem}.{name}.")) and not k.endswith(("_lo", "_hi"))
    ]


def _where(cross: dict[str, float], keys: list[str]) -> str:
    """ "≈ 5.7 [5.1, 6.3]" per key (one-sided where a bound is open), with the settings that tell a
    drafter's series apart."""
    parts = []
    for k in keys:
        lo, hi = cross.get(k + "_lo"), cross.get(k + "_hi")
        ci = (
            f" [{lo:.1f}, {hi:.1f}]"
            if lo is not None and hi is not None
            else f" [{lo:.1f}, ∞)"
            if lo is not None
            else f" (0, {hi:.1f}]"
            if hi is not None
            else ""
        )
        parts.append(f"≈ {cross[k]:.1f}{ci}" + (f" ({k.split('.', 2)[2]})" if k.count(".") > 1 else ""))
    return ", ".join(parts)


def share(row: PointResult) -> str:
    """A point's SLO attainment with its interval: ``97% [93%, 99%]``."""
    est = metric_estimate(row, "slo_attainment")
    if est is None or not est.known:
        return f"{row.metrics['slo_attainment']:.0%}"
    return f"{est.value:.0%} [{est.lo:.0%}, {est.hi:.0%}]"


def verdict_class(speedup: Estimate, family: int = 1) -> str:
    """pays / loses / same, decided on the estimate's draws (stats.side): its interval at or above 1,
    below 1, or across it, at 95% jointly with the ``family`` − 1 other points of its series
    (Bonferroni: each at 1 − 5% / family)."""
    return {1: PAYS, -1: LOSES, 0: SAME}[side(speedup, family=family)]


def _times(speedup: Estimate, unpaired: bool = False) -> str:
    """``×1.13 [1.09, 1.17]``, or ``×1.13`` without an interval; ``×1.13 [1.02, 1.25] unpaired`` for a
    point whose windows did not take turns in a series where others did."""
    if not speedup.known:
        return f"×{speedup.value:.2f}"
    return f"×{speedup.value:.2f} [{speedup.lo:.2f}, {speedup.hi:.2f}]" + (" unpaired" if unpaired else "")


def _speedup_at(s: Series, x: float, est: Estimate) -> str:
    """The speedup at ``x`` (``_times``), marked unpaired where its series mixes paired and unpaired points
    (a series all one way says so once, in the methods line)."""
    mixed = len(set(s.paired.values())) > 1
    return _times(est, mixed and not s.paired.get(x, False))


LOADED = 1.0  # a 1-minute load average per core from which the host was busier than its cores


def inconclusive(s: Series, xs: Sequence[float]) -> str:
    """Why the points at ``xs`` could not be told from 1, as far as the sweep can see, and the
    settings that narrow their intervals."""
    widest = max(xs, key=lambda x: s.points[x].hi / max(s.points[x].lo, 1e-12))
    est = s.points[widest]
    causes = [f"the widest interval is at {_at(s, [widest])} ({_times(est)})"]
    if (least := detectable_from(est)) is not None:
        causes.append(
            f"at the spread its windows show they detect only a difference of {least:.0%} ({POWER:.0%} power)"
        )
    if not s.paired.get(widest, False):
        causes.append("its arms' windows did not take turns, so the machine's drift is not paired away (arms=auto)")
    loaded = {x: v for x, v in s.host_load.items() if x in xs and v >= LOADED}
    if loaded:
        x, v = max(loaded.items(), key=lambda kv: kv[1])
        causes.append(f"the host was loaded (load average {v:.1f} per core at {_at(s, [x])})")
    busy = {x: v for x, v in s.client_cpu.items() if x in xs}
    if busy:
        x, v = max(busy.items(), key=lambda kv: kv[1])
        causes.append(f"the load client used {v:.0%} of a core at {_at(s, [x])}")
    return (
        f"; inconclusive at {_at(s, xs)}: " + ", ".join(causes) + "; to narrow it, set measure.rel_ci (e.g. 0.05: "
        "windows until the 95% half-width is 5% of the value), raise measure.windows, or repeats=3 (or measure "
        "on a quieter machine)"
    )


def _at(s: Series, xs: Sequence[float]) -> str:
    """``batch 1, 4`` or ``rate 1, 4 req/s``."""
    return s.axis.at.format(x=", ".join(f"{x:g}" for x in xs))


def _bound(x: float) -> str:
    """A break-even bound: a whole number from 10 up, one decimal below."""
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def break_even(s: Series) -> str | None:
    """``break-even between 9 and 14 (first crossing, 95%)``, open on a side where the interval is; and,
    where the speedup may fall below 1 later than that (a point beyond it undecided, or the curve
    rising again), says so and how far."""
    value = s.axis.value.format
    if not s.intervals:
        return f"break-even ≈ {value(x=_bound(s.crossover))} (no interval)" if s.crossover is not None else None
    lo, hi = s.lo, s.first_hi
    if math.isfinite(lo) and math.isfinite(hi):
        words = f"break-even between {_bound(lo)} and {value(x=_bound(hi))} (first crossing, 95%)"
    elif math.isfinite(hi):
        words = f"break-even below {value(x=_bound(hi))} (first crossing, 95%)"
    elif math.isfinite(lo):
        words = f"break-even above {value(x=_bound(lo))} (first crossing, 95%)"
    else:
        return None
    if s.hi > hi:
        later = [x for x, p in s.points.items() if x > hi and verdict_class(p, s.family) != LOSES]
        where = f"undecided at {_at(s, later)}" if later else "its curve"
        reach = f"up to {value(x=_bound(s.hi))}" if math.isfinite(s.hi) else "beyond the last measured point"
        words += f"; {where}: the speedup may cross 1 again {reach}"
    return words


def describe(s: Series) -> str:
    """One line per series, e.g. "tiny pays up to batch 8 (×1.13 [1.09, 1.17]), loses from batch 16
    (×0.49 [0.44, 0.54]); break-even between 9 and 14 (95%)"."""
    doubtful = set(s.unstable) | set(s.unsettled)
    trusted = [(x, p) for x, p in s.points.items() if x not in doubtful]
    grouped = itertools.groupby(trusted, key=lambda xp: verdict_class(xp[1], s.family))
    runs = [(cls, list(group)) for cls, group in grouped]
    parts = []
    for i, (cls, run) in enumerate(runs):
        (first, first_est), (last, last_est) = run[0], run[-1]
        if cls == SAME:
            parts.append(f"no measurable difference at {_at(s, [x for x, _ in run])}")
        elif cls == PAYS and i == 0 and len(runs) > 1:
            parts.append(f"pays up to {_at(s, [last])} ({_speedup_at(s, last, last_est)})")
        elif cls == LOSES and i == len(runs) - 1 and len(runs) > 1:
            parts.append(f"loses from {_at(s, [first])} ({_speedup_at(s, first, first_est)})")
        elif len(run) == 1:
            parts.append(f"{cls} at {_at(s, [first])} ({_speedup_at(s, first, first_est)})")
        else:
            every = "every measured " if len(runs) == 1 and not doubtful else ""
            gaps = any(first < x < last for x in doubtful)
            span = ", ".join(f"{x:g}" for x, _ in run) if gaps else f"{first:g}-{last:g}"
            ends = f"{_speedup_at(s, first, first_est)} to {_speedup_at(s, last, last_est)}"
            parts.append(f"{cls} at {every}{s.axis.at.format(x=span)} ({ends})")
    label = s.label + (" (per-stream decode speed)" if s.axis.ratio == "decode_speedup" else "")
    if not parts:
        line = f"{label}: no point measured well enough to judge"
    else:
        line = label + (": " if runs[0][0] == SAME else " ") + ", ".join(parts)
    if (where := break_even(s)) is not None:
        line += f"; {where}"
    if not s.intervals:
        line += "; one window per point, so no intervals: raise measure.windows"
    for x in s.unstable:
        line += f"; unstable at {_at(s, [x])}: rerun or raise measure.windows"
    for x, share in s.client_cpu.items():
        line += (
            f"; the load client used {share:.0%} of a core at {_at(s, [x])}: it may be the bottleneck there "
            "(docs/guides/confidence.md: Limits of the measurement)"
        )
    for x in s.unsettled:
        line += f"; unsettled at {_at(s, [x])} (a cap stopped it before measure.windows windows): raise measure.max_s"
    if s.intervals and (same := [x for x, p in trusted if verdict_class(p, s.family) == SAME]):
        line += inconclusive(s, same)
    return line


def verdicts(rows: Sequence[PointResult], analysis: Analysis) -> list[str]:
    """The answer in words: one line per speedup series, then the SLO rates of a rate sweep, then how
    its intervals were made (``how``)."""
    lines = [describe(s) for s in analysis.series] + slo_verdicts(rows, analysis.crossovers)
    return [*lines, how] if lines and (how := methods(rows, analysis)) else lines


METHODS_LEAD = f"{LEVEL_TEXT} CI [lo, hi]: "  # how a verdict's methods line starts (its last, or before a study's)


def methods(rows: Sequence[PointResult], analysis: Analysis) -> str | None:
    """One line on how the verdict's intervals were made: ``95% CI [lo, hi]: speedups paired t over 8
    window pairs (log scale); break-evens: ...``; None when it has no interval."""
    parts = []
    if any(s.intervals for s in analysis.series):
        pairs = [m["windows_paired"] for m in analysis.speedups.values()]
        parts.append(f"speedups {ratio_method(pairs)}, each 95% alone")
        families = sorted({s.family for s in analysis.series if s.intervals})
        sizes = "/".join(str(m) for m in families)
        parts.append(
            f"pays / loses / no measurable difference and the break-even hold jointly at 95% over each series' "
            f"{sizes} points (Bonferroni: each class at {1 - (1 - LEVEL) / max(families):.1%} where a series has "
            f"{max(families)}); break-evens: the {TAIL / max(families):.2%} and {1 - TAIL / max(families):.2%} "
            "quantiles of where the speedups, drawn from every point's distribution together, first and last "
            "fall below 1 (read between batches both linearly and in log speedup)"
        )
    if looked := _looks(rows):
        parts.append(looked)
    if power := _power(analysis.series):
        parts.append(power)
    if any(r.ok and r.load == "rate" and "slo_attainment" in r.metrics for r in rows):
        parts.append("SLO attainment: Clopper-Pearson over requests")
    return METHODS_LEAD + "; ".join(parts) if parts else None


def _looks(rows: Sequence[PointResult]) -> str | None:
    """How points measured to a precision target (``measure.rel_ci``) keep 95%; None without one."""
    targeted = [row for row in rows if look_alpha(row, row) is not None]
    if not targeted:
        return None
    row = targeted[0]
    at = looks(int(row.params["measure.windows"]), int(row.params["measure.max_windows"]))
    return (
        f"points measured to measure.rel_ci ({_stopped_on(targeted)}): every interval at its look's share of "
        f"the 5% (O'Brien-Fleming spending over looks at {', '.join(map(str, at))} windows), so that stopping "
        "early keeps 95%"
    )


def _stopped_on(rows: Sequence[PointResult]) -> str:
    """Which interval the precision target was judged on (the tag ``specexp.stopped_on``)."""
    on = {row.tags.get("specexp.stopped_on") for row in rows}
    if on == {"speedup"}:
        return "arms taking turns stopped together on their speedups' intervals"
    if "speedup" in on:
        return "arms taking turns with a baseline stopped together on their speedups, the others each on its throughput"
    return "each point stopped on its own output_throughput's interval"


def _power(all_series: Sequence[Series]) -> str | None:
    """``power: a speedup difference of 6%-14% detectable (80% power, at each point's spread)``: the
    smallest difference the design could tell from none, at the spread the points showed."""
    found = [d for s in all_series for p in s.points.values() if (d := detectable_from(p)) is not None]
    if not found:
        return None
    lo, hi = min(found), max(found)
    span = f"{lo:.0%}" if f"{lo:.0%}" == f"{hi:.0%}" else f"{lo:.0%}-{hi:.0%}"
    return f"power: a speedup difference of {span} detectable ({POWER:.0%} power, at each point's spread)"


def _slo_text(rows: Sequence[PointResult]) -> str:
    """ "TTFT ≤ 500 ms, TPOT ≤ 50 ms" when the rows share one SLO; "" when they differ."""
    texts = set()
    for row in rows:
        limits = [(name, row.params.get(f"slo.{key}")) for name, key in (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"))]
        texts.add(", ".join(f"{name} ≤ {float(v):g} ms" for name, v in limits if v not in (None, "None", "")))
    return f" ({texts.pop()})" if len(texts) == 1 else ""


def slo_verdicts(rows: Sequence[PointResult], cross: dict[str, float]) -> list[str]:
    """Per drafter of a rate sweep, the baseline included: up to which rate enough requests meet the SLO,
    claiming of each rate only what its attainment's interval supports (``cannot tell`` where it holds
    the target)."""
    lines = []
    rated = [r for r in rows if r.ok and r.load == "rate" and "slo_attainment" in r.metrics]
    for name in dict.fromkeys(r.drafter for r in rated):
        mine = sorted((r for r in rated if r.drafter == name), key=lambda r: r.rate or 0.0)
        target = min(slo_target(r) for r in mine)
        goal = f"{target:.0%} of requests meet the SLO{_slo_text(mine)}"
        keys = _keys(cross, "slo_max_rate", name)
        classes = [_meets(r) for r in mine]
        if keys:
            lines.append(f"with {name}, {goal} up to {_where(cross, keys)} req/s")
        elif all(c == 1 for c in classes):
            lines.append(
                f"with {name}, {goal} at every measured rate (up to {mine[-1].rate:g} req/s: attainment "
                f"{share(mine[-1])})"
            )
        else:
            j = next(i for i, c in enumerate(classes) if c != 1)
            at = f"{mine[j].rate:g} req/s (attainment {share(mine[j])})"
            upto = f"with {name}, {goal} up to {mine[j - 1].rate:g} req/s"
            if classes[j] == -1:
                lines.append(f"{upto}, fewer from {at}" if j else f"with {name}, fewer than {goal} already at {at}")
            else:
                doubt = f"its interval holds {target:.0%}"
                lines.append(
                    f"{upto}; cannot tell at {at}: {doubt}"
                    if j
                    else f"with {name}, cannot tell whether {goal} at {at}: {doubt}"
                )
    return lines


def _meets(row: PointResult) -> int:
    """+1 where the attainment's 95% interval lies at or above the point's slo.target, -1 where it lies
    below, 0 where it holds the target (or there is no interval: the value alone claims nothing)."""
    est = metric_estimate(row, "slo_attainment")
    if est is None or not est.known:
        return 0
    return side(est, slo_target(row))
