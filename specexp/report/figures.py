"""What the report plots, as plain data: one spec per figure, drawn by any backend (plots.py).

Keeping the figures backend-free lets the PNG and the interactive HTML show exactly the same lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from specexp.report.series import group
from specexp.result import PointResult

_POSITION = re.compile(r"accept_rate_pos_(\d+)$")


@dataclass
class Line:
    label: str
    x: list[float]
    y: list[float]
    err: list[float] | None = None  # 95% half-widths, when the points were repeated
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


def _errors(halves: list[float | None]) -> list[float] | None:
    """Error bars from ``<key>_ci95``; None when no point was repeated."""
    return None if all(h is None for h in halves) else [h or 0.0 for h in halves]


def _vs_batch(series: dict[str, list[PointResult]], metric: str, suffix: str = "", dashed: bool = False) -> list[Line]:
    lines = []
    for name, rows in series.items():
        have = [r for r in rows if r.metrics.get(metric) is not None]
        if have:
            y = [r.metrics[metric] for r in have]
            err = _errors([r.metrics.get(f"{metric}_ci95") for r in have])
            lines.append(Line(name + suffix, [float(r.batch) for r in have], y, err, dashed, name))
    return lines


def _per_position(series: dict[str, list[PointResult]]) -> list[Line]:
    lines = []
    for name, rows in series.items():
        for row in rows:
            keys = sorted((int(m[1]), m[0]) for k in row.metrics if (m := _POSITION.match(k)))
            if keys:
                y = [row.metrics[k] for _, k in keys]
                err = _errors([row.metrics.get(f"{k}_ci95") for _, k in keys])
                lines.append(Line(f"{name} b={row.batch}", [float(i) for i, _ in keys], y, err))
    return lines


def _latency(series: dict[str, list[PointResult]], metric: str) -> list[Line]:
    return _vs_batch(series, f"{metric}_p50", " p50") + _vs_batch(series, f"{metric}_p99", " p99", dashed=True)


def _mark(key: str, crossovers: dict[str, float]) -> str:
    """ "tiny crossover ≈ 5.7", with its 95% bounds when repeats gave them."""
    label = f"{key.removeprefix('crossover_batch.')} crossover ≈ {crossovers[key]:.1f}"
    lo, hi = crossovers.get(f"{key}_lo"), crossovers.get(f"{key}_hi")
    return label + (f" (95% CI {lo:.1f}-{hi:.1f})" if lo is not None and hi is not None else "")


def figures(rows: Sequence[PointResult], crossovers: dict[str, float]) -> list[Figure]:
    """Every figure that has data; failed points are left out."""
    series = group(rows)
    marks = {_mark(k, crossovers): v for k, v in crossovers.items() if not k.endswith(("_lo", "_hi"))}
    specs = [
        Figure(
            "output_throughput", "Output throughput", "batch", "output tok/s", _vs_batch(series, "output_throughput")
        ),
        Figure(
            "speedup",
            "Speedup of speculation (output throughput vs drafter=none)",
            "batch",
            "speedup",
            _vs_batch(series, "speedup"),
            hline=1.0,
            vlines=marks,
        ),
        Figure(
            "decode_speed",
            "Single-stream decode speed",
            "batch",
            "tok/s per stream",
            _vs_batch(series, "decode_speed_mean"),
        ),
        Figure("accept_length", "Accept length", "batch", "tokens per verify step", _vs_batch(series, "accept_length")),
        Figure(
            "accept_rate_pos",
            "Acceptance per draft position",
            "draft position",
            "accepted / verify steps",
            _per_position(series),
            log2x=False,
        ),
        Figure("ttft", "Time to first token (p50 solid, p99 dashed)", "batch", "ms", _latency(series, "ttft_ms")),
        Figure("tpot", "Time per output token (p50 solid, p99 dashed)", "batch", "ms", _latency(series, "tpot_ms")),
    ]
    return [f for f in specs if f.lines]
