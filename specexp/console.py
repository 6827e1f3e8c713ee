"""What the user sees: tables of points and the line a bad config exits with (live progress: specexp.live)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from specexp import live
from specexp.config import ConfigError
from specexp.metrics.registry import digits, header, table_keys
from specexp.result import PointResult

console = live.console  # one console on stderr: lines printed through it keep clear of the live status


@contextmanager
def invalid_config_exits() -> Iterator[None]:
    """A ConfigError becomes one red line and exit code 2: bad input stops before any server starts.
    Its text is no markup: ``pip install 'specexp[datasets]'`` keeps its brackets."""
    try:
        yield
    except ConfigError as exc:
        console.print(f"[red]invalid configuration[/red]: {escape(str(exc))}", soft_wrap=True)
        raise SystemExit(2) from None


def interval_places(half: float, fallback: int) -> int:
    """Decimal places for a value and its 95% half-width: two significant digits of the half-width
    (no more, no fewer), so the interval, not the metric's kind, says how precise the number is."""
    if not half or not math.isfinite(half):
        return fallback
    return min(6, max(0, 1 - math.floor(math.log10(abs(half)))))


def fmt(value: Any, digits: int = 1, ci: Any = None, bounds: tuple[Any, Any] | None = None) -> str:
    """A number with thousands separators and, where it has an interval, the interval as ``[lo, hi]``
    (all to the places the interval sets): ``bounds`` as given (a ratio's, a rate's or a proportion's
    are asymmetric), else ``value ± ci``'s ends; "-" when absent. Never ``±``: half an asymmetric
    interval's width would misstate both ends. Every table, report and console line formats through
    here, and says once how its intervals were made (specexp.metrics.methods)."""
    if value is None or value == "":
        return "-"
    if isinstance(value, int) and not isinstance(value, bool) and ci is None and bounds is None:
        return f"{value:,}"
    if isinstance(value, int | float):
        if bounds is None or None in bounds:
            bounds = None if ci is None else (value - ci, value + ci)
        if bounds is None:
            return f"{value:,.{digits}f}"
        lo, hi = float(bounds[0]), float(bounds[1])
        places = interval_places((hi - lo) / 2, digits)
        return f"{value:,.{places}f} [{lo:,.{places}f}, {hi:,.{places}f}]"
    return str(value)


def cell(row: dict[str, Any], key: str) -> str:
    """A flat row's metric with its interval: its recorded bounds (``<key>_lo`` / ``<key>_hi``) where it
    has them, else its symmetric ``<key>_ci95``."""
    bounds = (row.get(f"{key}_lo"), row.get(f"{key}_hi"))
    return fmt(row.get(key), digits(key), row.get(f"{key}_ci95"), bounds)


def load_header(rows: Sequence[dict[str, Any]]) -> str:
    """The load column's name: batch, rate (req/s), or both for a table that mixes closed and open loops."""
    kinds = {row.get("load.kind") or "closed" for row in rows}
    return "batch" if "rate" not in kinds else "rate" if kinds == {"rate"} else "batch | rate"


def load_cell(row: dict[str, Any]) -> str:
    """A flat row's place on its load axis: its batch, or its request rate."""
    rate = row.get("load.rate")
    return fmt(row.get("batch")) if row.get("load.kind") != "rate" else f"{float(rate):g}/s"


def points_table(rows: Sequence[dict[str, Any]], title: str, settings: Sequence[str] = ()) -> Table:
    """engine × drafter × ``settings`` (a study's tuned keys) × load → the headline columns and status
    (rows from report.summary.summary_rows)."""
    from specexp.metrics.methods import methods_line  # SciPy's: the CLI's refusals and --help go without it

    keys = table_keys(rows)
    how = methods_line(keys, rows)
    table = Table(title=title, caption=Text(how) if how else None)  # Text: "[lo, hi]" is no markup tag
    trials = any("trial" in row for row in rows)
    if trials:
        table.add_column("trial", justify="right", min_width=5)
    table.add_column("engine")
    table.add_column("drafter")
    for name in settings:  # a study's tuned keys, named whole however narrow the terminal
        table.add_column(name, justify="right", min_width=len(name))
    table.add_column(load_header(rows), justify="right")
    for key in keys:
        table.add_column(header(key), justify="right")
    table.add_column("status")
    for row in rows:
        cells = [cell(row, key) for key in keys]
        table.add_row(
            *([fmt(row.get("trial") or None)] if trials else []),
            fmt(row.get("engine.name")),
            fmt(row.get("drafter.name")),
            *(fmt(row.get(key)) for key in settings),
            load_cell(row),
            *cells,
            fmt(row.get("status")),
        )
    return table


def load_override(result: PointResult) -> str:
    """The override that puts a point at its place on its load axis."""
    return f"load=rate rate={result.rate:g}" if result.load == "rate" else f"batch={result.batch}"


def single_run_notes(result: PointResult, drafter_text: str, link: str | None) -> list[str]:
    """What a single run's table leaves unsaid: what its drafter is, why its speedup is "-", where
    it is in MLflow."""
    lines = [f"drafter={result.drafter}: {drafter_text}"] if drafter_text else []
    if result.speculative:
        lines.append(
            "speedup -: a single run has no drafter=none baseline to divide by; measure both as a sweep: "
            f"python -m specexp drafter=none,{result.drafter} {load_override(result)} -m"
        )
    if link:
        lines.append(f"in MLflow: {link}")
    return lines
