"""Markdown for reports: readable in a terminal, in a pull request, and as an MLflow artifact."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specexp.console import fmt, load_cell, load_header
from specexp.metrics.registry import digits, header, table_keys
from specexp.report.categories import category_rows
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
    acceptance, latency, (rates, goodput,) status; ``± ci95`` where the point has an interval."""
    names = labels(series_key(r) for r in rows)
    flats = summary_rows(list(rows), settings)
    keys = table_keys(flats)
    trials = ["trial"] if any("trial" in flat for flat in flats) else []
    headers = ["config", *trials, *settings, load_header(flats), *(header(k) for k in keys), "status"]
    body = []
    for row, flat in zip(rows, flats, strict=True):
        cells = [fmt(flat.get(key), digits(key), flat.get(f"{key}_ci95")) for key in keys]
        tuned = [fmt(flat.get(key) or None) for key in [*trials]] + [fmt(flat.get(key)) for key in settings]
        body.append([names[series_key(row)], *tuned, load_cell(flat), *cells, str(flat["status"])])
    return table(headers, body)


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


def sweep_report(
    title: str,
    rows: Sequence[PointResult],
    verdicts: Sequence[str],
    plots: Sequence[Path],
    settings: Sequence[str] = (),
) -> str:
    failed = sum(not r.ok for r in rows)
    parts = [f"# {title}", f"{len(rows)} points, {failed} failed", points_markdown(rows, settings)]
    per_category = categories_markdown(rows)
    if per_category:
        parts.append(per_category)
    if verdicts:
        parts.append("\n".join(f"- {line}" for line in verdicts))
    images = [p.name for p in plots if p.suffix == ".png"]
    if images:
        links = [f"![{Path(n).stem}]({n})" for n in images]
        parts.append("\n".join(["## Plots", "[interactive: plots.html](plots.html)", "", *links]))
    return "\n\n".join(parts) + "\n"
