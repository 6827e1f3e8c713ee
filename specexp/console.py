"""What the user sees: tables of points and the line a bad config exits with (live progress: specexp.live)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.measure import Measurement
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


@dataclass
class Column:
    """A column of a points table: its header, its cells, and whether it is shown at any width."""

    header: str
    cells: list[str]
    kept: bool = False  # what names a point (engine, drafter, tuned settings, load, status)
    left: bool = False
    key: str | None = None  # a metric's, for the caption's line on how its intervals were made

    def width(self, stacked: bool) -> int:
        """Its cells' width, each on one line or (``stacked``) with the interval beneath the value."""
        return max((len(part) for c in self.cells for part in _parts(c, stacked)), default=1)

    def head(self, width: int) -> str:
        """The header wrapped at its spaces and dots to ``width`` (never cut): "output tok/s" over two
        lines above a narrow column, "drafter.num_steps" as "drafter." and "num_steps"."""
        words = self.header.replace(".", ". ").split()
        lines: list[str] = []
        for word in words:
            glue = "" if lines and lines[-1].endswith(".") else " "
            if lines and len(lines[-1]) + len(glue) + len(word) <= width:
                lines[-1] += glue + word
            else:
                lines.append(word)
        return "\n".join(lines)


def _parts(text: str, stacked: bool) -> list[str]:
    """A cell's lines: ``1,234.5 [1,200.1, 1,268.9]`` whole, or stacked as the value over its interval."""
    value, sep, bounds = text.partition(" [")
    return [value, f"[{bounds}"] if stacked and sep else [text]


# The order metric columns are kept in when a terminal is too narrow for all of them: the answer
# (throughput, speedups, goodput) before acceptance and latency; each is then shown in table order.
PRIORITY = (
    "output_throughput",
    "speedup",
    "decode_speedup",
    "goodput",
    "slo_attainment",
    "completion_rate",
    "decode_speed",
    "accept_length",
    "ttft_ms_p50",
    "tpot_ms_p50",
    "accept_rate",
    "ttft_ms_p99",
    "achieved_rate",
    "offered_rate",
)


def _priority(column: Column, at: int) -> tuple[bool, int]:
    """Where a column comes in PRIORITY (one not in it after those, in table order); one without a
    single value last."""
    empty = all(c == "-" for c in column.cells)
    return empty, PRIORITY.index(column.key) if column.key in PRIORITY else len(PRIORITY) + at


class PointsTable:
    """A points table that fits the width it is drawn at (a terminal's, or ``COLUMNS``): the columns
    that name a point always, then metric columns by PRIORITY while they fit, each value whole (its
    interval beneath it where one line is too wide), headers wrapped rather than cut; the caption
    names what was left out. ``wide`` shows every column, as a file or pipe gets them."""

    def __init__(self, title: str, columns: list[Column], rows: Sequence[dict[str, Any]], wide: bool = False) -> None:
        self.title, self.columns, self.rows, self.wide = title, columns, rows, wide

    def fit(self, console: Console, width: int) -> tuple[list[Column], set[int]]:
        """The columns shown and which of them stack their intervals, for ``width`` characters."""
        if self.wide:
            return self.columns, set()
        ranked = sorted(range(len(self.columns)), key=lambda i: _priority(self.columns[i], i))
        chosen = {i for i, c in enumerate(self.columns) if c.kept}
        for i in ranked:
            trial = [c for j, c in enumerate(self.columns) if j in chosen or j == i]
            if i not in chosen and self._width(console, trial, set(range(len(trial)))) <= width:
                chosen.add(i)
        shown = [c for j, c in enumerate(self.columns) if j in chosen]
        stacked = set(range(len(shown)))
        for i in sorted(stacked, key=lambda i: _priority(shown[i], i)):
            if self._width(console, shown, stacked - {i}) <= width:
                stacked.discard(i)
        return shown, stacked

    def _width(self, console: Console, columns: list[Column], stacked: set[int]) -> int:
        unbounded = console.options.update_width(10_000)  # its natural width, not clamped to the console's
        return Measurement.get(console, unbounded, self.table(columns, stacked)).maximum

    def table(self, columns: list[Column], stacked: set[int], left_out: Sequence[str] = ()) -> Table:
        from specexp.metrics.methods import methods_line  # SciPy's: the CLI's refusals and --help go without it

        how = methods_line([c.key for c in columns if c.key], self.rows)
        notes = [how] if how else []
        if left_out:
            notes.append(f"not shown at this width: {', '.join(left_out)} (a wider terminal or COLUMNS=250 shows them)")
        caption = Text("\n".join(notes)) if notes else None  # Text: "[lo, hi]" is no markup tag
        table = Table(title=self.title, caption=caption, show_edge=False, pad_edge=False)
        for i, column in enumerate(columns):
            width = column.width(i in stacked)
            head = column.header if self.wide else column.head(width)
            table.add_column(head, justify="left" if column.left else "right", no_wrap=True)
        for r in range(len(columns[0].cells) if columns else 0):
            table.add_row(*("\n".join(_parts(c.cells[r], i in stacked)) for i, c in enumerate(columns)))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        shown, stacked = self.fit(console, options.max_width)
        left_out = [c.header for c in self.columns if c not in shown]
        yield self.table(shown, stacked, left_out)


def points_table(
    rows: Sequence[dict[str, Any]], title: str, settings: Sequence[str] = (), wide: bool = False
) -> PointsTable:
    """engine × drafter × ``settings`` (a study's tuned keys) × load → the headline columns and status
    (rows from report.summary.summary_rows), fitted to the width it is printed at (PointsTable)."""
    keys = table_keys(rows)
    columns = [Column("trial", [fmt(r.get("trial") or None) for r in rows], kept=True)]
    columns = columns if any("trial" in r for r in rows) else []
    columns += [
        Column(n, [fmt(r.get(k)) for r in rows], True, True)
        for n, k in (("engine", "engine.name"), ("drafter", "drafter.name"))
    ]
    columns += [Column(name, [fmt(r.get(name)) for r in rows], kept=True) for name in settings]
    columns.append(Column(load_header(rows), [load_cell(r) for r in rows], kept=True))
    columns += [Column(header(key), [cell(r, key) for r in rows], key=key) for key in keys]
    columns.append(Column("status", [fmt(r.get("status")) for r in rows], kept=True, left=True))
    return PointsTable(title, columns, rows, wide)


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
    return lines + (link_lines("in MLflow", link) if link else [])


def link_lines(label: str, text: str) -> list[str]:
    """``label: text`` with the URL that ends ``text`` on a line of its own, to be printed with
    ``soft_wrap=True`` (never wrapped or cropped): a terminal then sees the URL whole and can open it."""
    lead, _, url = text.rpartition(" ")
    if not url.startswith(("http://", "https://")):
        return [f"{label}: {text}"]
    return [f"{label}: {lead}".rstrip(), url]
