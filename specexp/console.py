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

from specexp.load.records import RequestRecord

# Tables are meant to be pasted: keep them wide when the output is a file or a pipe.
console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


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


# header, metric key, digits: the headline columns of every table of points (console and markdown)
POINT_COLUMNS = (
    ("output tok/s", "output_throughput", 1),
    ("stream tok/s", "decode_speed_mean", 1),
    ("speedup", "speedup", 2),
    ("accept len", "accept_length", 2),
    ("accept rate", "accept_rate", 2),
    ("TTFT p50 ms", "ttft_ms_p50", 1),
    ("TTFT p99 ms", "ttft_ms_p99", 1),
    ("TPOT p50 ms", "tpot_ms_p50", 2),
)


def fmt(value: Any, digits: int = 1, ci: Any = None) -> str:
    """A number with thousands separators and ``± ci`` when repeats gave an interval; "-" when absent."""
    if value is None or value == "":
        return "-"
    if isinstance(value, int) and not isinstance(value, bool) and ci is None:
        return f"{value:,}"
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}" + (f" ± {ci:,.{digits}f}" if ci is not None else "")
    return str(value)


def points_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    """engine × drafter × batch → the headline columns and status (rows from summary_rows)."""
    table = Table(title=title)
    for header in ("engine", "drafter", "batch"):
        table.add_column(header, justify="left" if header != "batch" else "right")
    for header, _, _ in POINT_COLUMNS:
        table.add_column(header, justify="right")
    table.add_column("status")
    for row in rows:
        cells = [fmt(row.get(key), digits, row.get(f"{key}_ci95")) for _, key, digits in POINT_COLUMNS]
        table.add_row(
            fmt(row.get("engine.name")),
            fmt(row.get("drafter.name")),
            fmt(row.get("batch")),
            *cells,
            fmt(row.get("status")),
        )
    return table
