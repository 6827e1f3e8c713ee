"""How each printed interval was made, said once per output (a table's caption, a verdict's last
line), so that a reader of ``660 [555, 765]`` knows its level and method without the docs.

The methods are those of specexp.metrics.stats and specexp.metrics.window_results: a mean over windows with
a Student-t interval, a rate's on the log scale, a ratio of sums with the ratio estimator's, a
proportion's Clopper-Pearson interval over requests, and a speedup's paired or unpaired t on the
log scale (specexp.report.analysis).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specexp.metrics.registry import RATIO_METRICS, header
from specexp.metrics.stats import LEVEL
from specexp.metrics.window_results import POOLED, scale_of

RATIO_KEYS = tuple(key for key, _, _ in RATIO_METRICS)
LEVEL_TEXT = f"{LEVEL:.0%}"


def counted(values: Sequence[float], noun: str) -> str:
    """``8 windows`` or ``3-8 windows``: how many a method pooled, over the rows that have it."""
    lo, hi = int(min(values)), int(max(values))
    return f"{lo} {noun}" if lo == hi else f"{lo}-{hi} {noun}"


def ratio_method(pairs: Sequence[float]) -> str:
    """A speedup's method over the rows that have one: the one estimand (each arm's windows pooled:
    tokens over seconds, docs/METRICS.md "One speedup"), its interval paired over the window pairs,
    unpaired (Welch) where the arms' windows did not take turns, or both, each with how many rows used it."""
    paired = [p for p in pairs if p >= 2]
    parts = [f"paired t over {counted(paired, 'window pairs')} (log scale)"] if paired else []
    if len(paired) < len(pairs):
        parts.append(f"unpaired Welch t (log scale) at {len(pairs) - len(paired)} of {len(pairs)} points")
    return "arms' pooled windows (tokens over seconds), " + ", ".join(parts)


def _asymmetric(row: Mapping[str, Any], key: str) -> bool:
    """Whether a row's interval of ``key`` is not centred on its value (made on a log or logit scale)."""
    value, lo, hi = (row.get(k) for k in (key, f"{key}_lo", f"{key}_hi"))
    if value is None or lo is None or hi is None:
        return False
    return abs((hi - value) - (value - lo)) > 1e-9 * max(abs(value), 1.0)


def key_method(key: str, rows: Sequence[Mapping[str, Any]]) -> str | None:
    """How the intervals of ``key`` in ``rows`` (flat point rows) were made; None when none has one."""
    mine = [row for row in rows if row.get(f"{key}_ci95") is not None or row.get(f"{key}_lo") is not None]
    if not mine:
        return None
    windows = counted([float(row.get("windows") or 1) for row in mine], "windows")
    if key == "slo_attainment":
        return "Clopper-Pearson over requests"
    if key in RATIO_KEYS:
        return ratio_method([float(row.get("windows_paired") or 0) for row in mine])
    if key in POOLED:
        return f"ratio estimator over {windows} (log scale)"
    scale = scale_of(key) if any(_asymmetric(row, key) for row in mine) else "linear"  # else recorded before scales
    return f"Student-t over {windows}" + ("" if scale == "linear" else f" ({scale} scale)")


def methods_line(keys: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str | None:
    """``[lo, hi]: 95% intervals; output tok/s, TTFT p50 ms: Student-t over 8 windows; speedup: paired t
    over 8 window pairs (log scale)``, the keys that share a method named together; None when no key
    has an interval."""
    by_method: dict[str, list[str]] = {}
    for key in keys:
        if (method := key_method(key, rows)) is not None:
            by_method.setdefault(method, []).append(header(key))
    if not by_method:
        return None
    said = "; ".join(f"{', '.join(names)}: {method}" for method, names in by_method.items())
    return f"[lo, hi]: {LEVEL_TEXT} intervals; {said}"
