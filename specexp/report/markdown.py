"""Markdown for reports: readable in a terminal, in a pull request, and as an MLflow artifact."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from specexp.console import cell, fmt, load_cell, load_header
from specexp.metrics.methods import methods_line
from specexp.metrics.registry import digits, header, table_keys
from specexp.report.category_speedups import category_rows
from specexp.report.crossover_points import believed_map, break_even
from specexp.report.series import labels, series_key
from specexp.report.summary import summary_rows
from specexp.result import PointResult


def escape(text: object) -> str:
    """Text that stays inside its table cell or list item: pipes escaped, line breaks as ``<br>``
    (a multi-line ``workload.prompt_format`` would otherwise end the table)."""
    return str(text).replace("|", "\\|").replace("\r\n", "\n").replace("\n", "<br>")


def table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured table: the first column (the config) left-aligned, the numbers right-aligned."""
    align = [":--", *["--:"] * (len(headers) - 1)]
    lines = [headers, align, *body]
    return "\n".join("| " + " | ".join(escape(c) for c in line) + " |" for line in lines)


def points_markdown(rows: Sequence[PointResult], settings: Sequence[str] = ()) -> str:
    """config × ``settings`` (a study's tuned keys) × load → throughput, single-stream speed, speedup,
    acceptance, latency, (rates, goodput,) status; ``[lo, hi]`` where the point has an interval (how they
    were made: points_methods)."""
    names = labels(series_key(r) for r in rows)
    flats = summary_rows(list(rows), settings)
    keys = table_keys(flats)
    trials = ["trial"] if any("trial" in flat for flat in flats) else []
    headers = ["config", *trials, *settings, load_header(flats), *(header(k) for k in keys), "status"]
    body = []
    for row, flat in zip(rows, flats, strict=True):
        cells = [cell(flat, key) for key in keys]
        tuned = [fmt(flat.get(key) or None) for key in [*trials]] + [fmt(flat.get(key)) for key in settings]
        body.append([names[series_key(row)], *tuned, load_cell(flat), *cells, str(flat["status"])])
    return table(headers, body)


def points_methods(rows: Sequence[PointResult], settings: Sequence[str] = ()) -> str | None:
    """The line under points_markdown's table that says how its intervals were made."""
    flats = summary_rows(list(rows), settings)
    return methods_line(table_keys(flats), flats)


def categories_markdown(rows: Sequence[PointResult]) -> str | None:
    """Speculative point × category → requests, acceptance, speedup over the baseline on that category;
    None when no point's prompts carry categories."""
    found = sorted(category_rows(rows), key=lambda c: (series_key(c.point), c.category, c.point.batch))
    if not found:
        return None
    names = labels(series_key(r) for r in rows)
    flats = summary_rows([c.point for c in found])
    headers = ["config", load_header(flats), "category", "requests", header("accept_length"), header("accept_rate")]
    body = [
        [
            names[series_key(c.point)],
            load_cell(flat),
            c.category,
            str(c.requests),
            fmt(c.accept_length, digits("accept_length")),
            fmt(c.accept_rate, digits("accept_rate")),
            fmt(c.speedup, digits("speedup")),
        ]
        for c, flat in zip(found, flats, strict=True)
    ]
    return "## Per category\n" + table([*headers, header("speedup")], body)


def _bound(x: float) -> str:
    return fmt(x, 1) if math.isfinite(x) else ("-inf" if x < 0 else "+inf")


def map_markdown(rows: Sequence[PointResult]) -> str | None:
    """The break-even map as a table: context length x batch -> the drafter's speedup with its 95%
    interval, and each length's break-even with its interval (crossover_points.break_even); a batch
    set aside is marked, not given a value, and listed with why. None under two context lengths."""
    found = believed_map(rows)
    if len(found) < 2:
        return None
    batches = sorted({b for one in found.values() for b in one.measured})
    headers = ["prompt tokens", *(f"batch {b}" for b in batches), "break-even (95%)"]
    body, notes = [], []
    for n, one in found.items():
        cells = []
        for b in batches:
            e = one.settled.get(b)
            if b in one.aside:
                cells.append(f"set aside ({one.aside[b]})")
            elif e is None:
                cells.append("")
            else:
                cells.append(fmt(e.value, 2, bounds=(e.lo, e.hi) if e.known else None))
        point, lo, hi = break_even(one.settled)
        cells.append(f"{_bound(point) if point is not None else '-'} [{_bound(lo)}, {_bound(hi)}]")
        body.append([n, *cells])
        if one.aside:
            notes.append(f"- prompt tokens {n}: {one.words()}")
    intro = (
        "Speedup (drafter / none, output tokens/s) with its 95% interval at each measured batch; the "
        "break-even is where it falls through 1, interpolated in log2(batch), with its 95% interval."
    )
    return "\n\n".join(["## Break-even map", intro, table(headers, body), *(["\n".join(notes)] if notes else [])])


def sweep_report(
    title: str,
    rows: Sequence[PointResult],
    verdicts: Sequence[str],
    plots: Sequence[Path],
    settings: Sequence[str] = (),
    sections: Sequence[str] = (),
) -> str:
    failed = sum(not r.ok for r in rows)
    parts = [f"# {title}", f"{len(rows)} points, {failed} failed", points_markdown(rows, settings)]
    if how := points_methods(rows, settings):
        parts.append(how)
    per_category = categories_markdown(rows)
    if per_category:
        parts.append(per_category)
    parts += sections  # e.g. the break-even map's table
    if verdicts:
        parts.append("\n".join(f"- {line}" for line in verdicts))
    images = [p.name for p in plots if p.suffix == ".png"]
    if images:
        links = [f"![{Path(n).stem}]({n})" for n in images]
        parts.append("\n".join(["## Plots", "[interactive: plots.html](plots.html)", "", *links]))
    return "\n\n".join(parts) + "\n"
