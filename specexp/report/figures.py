"""What the report plots, as plain data: one spec per figure, drawn by any backend (plots.py).

Keeping the figures backend-free lets the PNG and the interactive HTML show exactly the same lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from specexp.metrics.stats import Estimate, combine
from specexp.report.analysis import AXES, metric_estimate, slo_target, x_of
from specexp.report.series import group
from specexp.result import PointResult

_POSITION = re.compile(r"accept_rate_pos_(\d+)$")


@dataclass
class Line:
    label: str
    x: list[float]
    y: list[float]
    # 95% intervals as distances below and above each y (asymmetric for ratios, rates and proportions,
    # whose bounds never leave their range), where the points have intervals
    err: list[tuple[float, float]] | None = None
    dashed: bool = False
    series: str = ""  # lines of one series share a colour (p50 solid, p99 dashed)


@dataclass
class Figure:
    name: str  # file stem
    title: str
    xlabel: str
    ylabel: str
    lines: list[Line]
    log2x: bool = True
    hline: float | None = None
    vlines: dict[str, float] = field(default_factory=dict)  # label -> x
    bands: list[tuple[float, float]] = field(default_factory=list)  # shaded x ranges: crossover intervals


def _errors(bounds: list[tuple[float, float] | None]) -> list[tuple[float, float]] | None:
    """Error bars (below, above); None when no point has an interval."""
    return None if all(b is None for b in bounds) else [b or (0.0, 0.0) for b in bounds]


def _bars(est: Estimate) -> tuple[float, float] | None:
    """An estimate's 95% interval as distances below and above its value (its own bounds: a proportion's
    stay in [0, 1], a ratio's and a rate's above 0)."""
    return (est.value - est.lo, est.hi - est.value) if est.known else None


def _vs_load(series: dict[str, list[PointResult]], metric: str, suffix: str = "", dashed: bool = False) -> list[Line]:
    """One line per series along its load axis (batch or request rate); a point measured on several
    launches (repeats) is one marker, the launches combined, with the combined interval."""
    lines = []
    for name, rows in series.items():
        launches: dict[float, list[Estimate]] = {}
        for r in rows:
            if (est := metric_estimate(r, metric)) is not None:
                launches.setdefault(x_of(r), []).append(est)
        if launches:
            points = {x: combine(ests) for x, ests in launches.items()}
            err = _errors([_bars(p) for p in points.values()])
            lines.append(Line(name + suffix, list(points), [p.value for p in points.values()], err, dashed, name))
    return lines


def _completed(series: dict[str, list[PointResult]]) -> list[Line]:
    """Completed request rates with their intervals, and the rates offered: a saturated point's
    interval lies below that line (the achieved rate, over the arrivals, reads the offered one)."""
    lines = _vs_load(series, "completion_rate")
    rates = sorted({r.rate for rows in series.values() for r in rows if r.load == "rate" and r.rate})
    return [*lines, Line("offered (load.rate)", rates, rates, dashed=True, series="offered")] if lines else []


def _per_position(series: dict[str, list[PointResult]]) -> list[Line]:
    lines = []
    for name, rows in series.items():
        for row in rows:
            keys = sorted((int(m[1]), m[0]) for k in row.metrics if (m := _POSITION.match(k)))
            if keys:
                y = [row.metrics[k] for _, k in keys]
                halves = [row.metrics.get(f"{k}_ci95") for _, k in keys]
                err = _errors([None if h is None else (h, h) for h in halves])
                at = f"b={row.batch}" if row.load == "closed" else f"r={row.rate:g}"
                lines.append(Line(f"{name} {at}", [float(i) for i, _ in keys], y, err))
    return lines


def _latency(series: dict[str, list[PointResult]], metric: str) -> list[Line]:
    return _vs_load(series, f"{metric}_p50", " p50") + _vs_load(series, f"{metric}_p99", " p99", dashed=True)


def _marks(stem: str, what: str, crossovers: dict[str, float]) -> dict[str, float]:
    """ "tiny crossover ≈ 5.7" per ``<stem>.*`` key, with its 95% bounds when intervals gave them."""
    marks = {}
    for key, value in crossovers.items():
        if key.startswith(f"{stem}.") and not key.endswith(("_lo", "_hi")):
            label = f"{key.removeprefix(f'{stem}.')} {what} ≈ {value:.1f}"
            lo, hi = crossovers.get(f"{key}_lo"), crossovers.get(f"{key}_hi")
            marks[label + (f" [{lo:.1f}, {hi:.1f}]" if lo is not None and hi is not None else "")] = value
    return marks


def _bands(stem: str, crossovers: dict[str, float]) -> list[tuple[float, float]]:
    """The 95% interval of each ``<stem>.*`` crossover that has both bounds, to shade."""
    return [
        (crossovers[f"{k}_lo"], crossovers[f"{k}_hi"])
        for k in crossovers
        if k.startswith(f"{stem}.") and f"{k}_lo" in crossovers and f"{k}_hi" in crossovers
    ]


def _xlabel(rows: Sequence[PointResult]) -> str:
    return " / ".join(dict.fromkeys(AXES[r.load].label for r in rows if r.ok)) or "batch"


def figures(rows: Sequence[PointResult], crossovers: dict[str, float]) -> list[Figure]:
    """Every figure that has data; failed points are left out."""
    series = group(rows)
    x = _xlabel(rows)
    targets = {slo_target(r) for r in rows if r.ok and "slo_attainment" in r.metrics}
    specs = [
        Figure("output_throughput", "Output throughput", x, "output tok/s", _vs_load(series, "output_throughput")),
        Figure(
            "speedup",
            "Speedup of speculation (output throughput vs drafter=none)",
            x,
            "speedup",
            _vs_load(series, "speedup"),
            hline=1.0,
            vlines=_marks("crossover_batch", "crossover", crossovers),
            bands=_bands("crossover_batch", crossovers),
        ),
        Figure(
            "decode_speed",
            "Single-stream decode speed",
            x,
            "tok/s per stream",
            _vs_load(series, "decode_speed"),
        ),
        Figure(
            "decode_speedup",
            "Per-stream speedup of speculation (decode speed vs drafter=none)",
            x,
            "stream speedup",
            _vs_load(series, "decode_speedup"),
            hline=1.0,
            vlines=_marks("crossover_rate", "crossover", crossovers),
            bands=_bands("crossover_rate", crossovers),
        ),
        Figure(
            "request_rate",
            "Completed vs offered request rate (interval below the offered line: saturated)",
            x,
            "req/s",
            _completed(series),
        ),
        Figure(
            "goodput",
            "Goodput: requests per second meeting every SLO",
            x,
            "req/s",
            _vs_load(series, "goodput"),
        ),
        Figure(
            "slo_attainment",
            "Share of requests meeting every SLO",
            x,
            "attainment",
            _vs_load(series, "slo_attainment"),
            hline=targets.pop() if len(targets) == 1 else None,
            vlines=_marks("slo_max_rate", "max rate in SLO", crossovers),
        ),
        Figure("accept_length", "Accept length", x, "tokens per verify step", _vs_load(series, "accept_length")),
        Figure(
            "accept_rate_pos",
            "Acceptance per draft position",
            "draft position",
            "accepted / verify steps",
            _per_position(series),
            log2x=False,
        ),
        Figure("ttft", "Time to first token (p50 solid, p99 dashed)", x, "ms", _latency(series, "ttft_ms")),
        Figure("tpot", "Time per output token (p50 solid, p99 dashed)", x, "ms", _latency(series, "tpot_ms")),
    ]
    return [f for f in specs if f.lines]
