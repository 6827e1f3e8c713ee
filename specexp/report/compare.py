"""Two sweeps point by point (e.g. before/after an NCCL change): ratios B/A of the headline metrics,
each with its 95% interval from the two points' windows (the geomean row: the ratios' geometric mean).

Points match on every setting that makes them a different experiment, the load included, except the
settings that are the change itself: one value throughout A, another throughout B.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specexp.console import load_cell, load_header
from specexp.metrics.registry import COMPARE_KEYS, header
from specexp.metrics.stats import Estimate
from specexp.report.analysis import AXIS_PARAMS, arms_ratio
from specexp.report.fetch import Sweep
from specexp.report.markdown import escape, fmt, table
from specexp.report.series import labels, series_key, settings
from specexp.report.summary import summary_rows
from specexp.result import PointResult


@dataclass
class Comparison:
    changed: dict[str, tuple[str, str]]  # setting -> (value in A, value in B)
    pairs: list[tuple[PointResult, PointResult]]
    only_a: list[PointResult]
    only_b: list[PointResult]


def changed_settings(a: Sequence[PointResult], b: Sequence[PointResult]) -> dict[str, tuple[str, str]]:
    """Settings constant within each sweep but different between them; never the load (batch, rate)."""
    sa, sb = [dict(settings(r)) for r in a], [dict(settings(r)) for r in b]
    out = {}
    for key in sorted(set().union(*sa, *sb) - set(AXIS_PARAMS)):
        va, vb = {d.get(key, "-") for d in sa}, {d.get(key, "-") for d in sb}
        if len(va) == len(vb) == 1 and va != vb:
            out[key] = (va.pop(), vb.pop())
    return out


def compare(a: Sequence[PointResult], b: Sequence[PointResult]) -> Comparison:
    changed = changed_settings(a, b)
    by_key = {settings(r, changed): r for r in b}
    pairs = [(r, by_key[settings(r, changed)]) for r in a if settings(r, changed) in by_key]
    matched = {settings(r, changed) for r, _ in pairs}
    only_a = [r for r in a if settings(r, changed) not in matched]
    only_b = [r for r in b if settings(r, changed) not in matched]
    return Comparison(changed, pairs, only_a, only_b)


def ratio(a: PointResult, b: PointResult, metric: str) -> Estimate | None:
    """B/A of one metric with its 95% interval, unpaired (the two sweeps' windows are independent): the
    one estimand of every ratio (analysis.arms_ratio: each point's windows pooled, tokens over seconds);
    None unless both points are ok and measured it."""
    if not (a.ok and b.ok):
        return None
    found = arms_ratio(b, a, metric)
    return found[1] if found is not None else None


def _ratio_cell(e: Estimate | None) -> str:
    return fmt(e.value if e else None, 3, bounds=(e.lo, e.hi) if e is not None and e.known else None)


def _geomean(values: list[float]) -> float | None:
    values = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def compare_report(a: Sweep, b: Sweep) -> str:
    comp = compare(a.rows, b.rows)
    names = labels(series_key(r, comp.changed) for r, _ in comp.pairs)
    flats = summary_rows([ra for ra, _ in comp.pairs])
    load = load_header(flats)
    headers = ["config", load, "A output tok/s", "B output tok/s", *(f"{header(m)} B/A" for m in COMPARE_KEYS)]
    body, columns = [], {m: [] for m in COMPARE_KEYS}
    for (ra, rb), flat in zip(comp.pairs, flats, strict=True):
        ratios = {m: ratio(ra, rb, m) for m in COMPARE_KEYS}
        for m, v in ratios.items():
            if v is not None:
                columns[m].append(v.value)
        tput = [fmt(r.metrics.get("output_throughput") if r.ok else None) for r in (ra, rb)]
        name = names[series_key(ra, comp.changed)]
        body.append([name, load_cell(flat), *tput, *(_ratio_cell(ratios[m]) for m in COMPARE_KEYS)])
    if body:
        body.append(["geomean", "", "", "", *(fmt(_geomean(columns[m]), 3) for m in COMPARE_KEYS)])
    changes = [f"- `{k}`: {escape(va)} → {escape(vb)}" for k, (va, vb) in comp.changed.items()]
    changes = changes or ["- no setting differs"]
    parts = [
        f"# {b.sweep_id} (B) vs {a.sweep_id} (A)",
        "\n".join(["What changed:", *changes]),
        table(headers, body) if body else "no points in common",
    ]
    if body:
        parts.append(
            "[lo, hi]: 95% intervals of B/A, unpaired (the sweeps' windows are independent): each point's windows "
            "pooled (tokens over seconds; percentiles: their recorded values), Student-t on the log scale, the "
            "points' relative errors added in quadrature, Welch-Satterthwaite degrees of freedom"
        )
    if comp.only_a or comp.only_b:
        parts.append(f"points without a counterpart: {len(comp.only_a)} in A, {len(comp.only_b)} in B")
    return "\n\n".join(parts) + "\n"
