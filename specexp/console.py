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

console = Console(stderr=True)


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


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def points_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    """config × batch → throughput, single-stream speed, speedup, acceptance, latency, status."""
    table = Table(title=title)
    columns = [
        ("engine", "engine.name", 0),
        ("drafter", "drafter.name", 0),
        ("batch", "batch", 0),
        ("output tok/s", "output_throughput", 1),
        ("stream tok/s", "decode_speed_mean", 1),
        ("speedup", "speedup", 2),
        ("accept len", "accept_length", 2),
        ("accept rate", "accept_rate", 2),
        ("TTFT p50 ms", "ttft_ms_p50", 1),
        ("TPOT p50 ms", "tpot_ms_p50", 2),
        ("status", "status", 0),
    ]
    for header, _, _ in columns:
        table.add_column(header, justify="left" if header in ("engine", "drafter", "status") else "right")
    for row in rows:
        table.add_row(*(_fmt(row.get(key), digits) for _, key, digits in columns))
    return table
