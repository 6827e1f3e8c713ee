"""What the user sees: a progress bar per point (only on a terminal) and tables of points."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from specexp.config import ConfigError
from specexp.metrics.registry import digits, header, table_keys
from specexp.records import RequestRecord

# Tables are meant to be pasted: keep them wide when the output is a file or a pipe.
console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


@contextmanager
def invalid_config_exits() -> Iterator[None]:
    """A ConfigError becomes one red line and exit code 2: bad input stops before any server starts."""
    try:
        yield
    except ConfigError as exc:
        console.print(f"[red]invalid configuration[/red]: {exc}", soft_wrap=True)
        raise SystemExit(2) from None


@contextmanager
def load_progress(total: int, label: str) -> Iterator[Callable[[RequestRecord], None]]:
    """A live bar of requests done and output tok/s so far; a no-op when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield lambda record: None
        return
    start, tokens = time.monotonic(), [0]
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(label, total=total, rate="")

        def on_done(record: RequestRecord) -> None:
            tokens[0] += record.output_tokens if record.ok else 0
            rate = tokens[0] / max(time.monotonic() - start, 1e-9)
            progress.update(task, advance=1, rate=f"{rate:,.1f} tok/s")

        yield on_done


def fmt(value: Any, digits: int = 1, ci: Any = None) -> str:
    """A number with thousands separators and ``± ci`` when repeats gave an interval; "-" when absent."""
    if value is None or value == "":
        return "-"
    if isinstance(value, int) and not isinstance(value, bool) and ci is None:
        return f"{value:,}"
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}" + (f" ± {ci:,.{digits}f}" if ci is not None else "")
    return str(value)


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
    table = Table(title=title)
    keys = table_keys(rows)
    table.add_column("engine")
    table.add_column("drafter")
    for name in settings:
        table.add_column(name, justify="right")
    table.add_column(load_header(rows), justify="right")
    for key in keys:
        table.add_column(header(key), justify="right")
    table.add_column("status")
    for row in rows:
        cells = [fmt(row.get(key), digits(key), row.get(f"{key}_ci95")) for key in keys]
        table.add_row(
            fmt(row.get("engine.name")),
            fmt(row.get("drafter.name")),
            *(fmt(row.get(key)) for key in settings),
            load_cell(row),
            *cells,
            fmt(row.get("status")),
        )
    return table
