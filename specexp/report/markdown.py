"""Markdown for reports: readable in a terminal, in a pull request, and as an MLflow artifact."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specexp.console import POINT_COLUMNS, fmt
from specexp.report.analysis import Row
from specexp.report.series import labels, series_key
from specexp.report.sweep import summary_rows


def table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured table: the first column (the config) left-aligned, the numbers right-aligned."""
    align = [":--", *["--:"] * (len(headers) - 1)]
    lines = [headers, align, *body]
    return "\n".join("| " + " | ".join(str(c).replace("|", "\\|") for c in line) + " |" for line in lines)


def points_table(rows: Sequence[Row]) -> str:
    """config × batch → throughput, single-stream speed, speedup, acceptance, latency, status;
    ``± ci95`` where the point was repeated."""
    names = labels(series_key(r) for r in rows)
    headers = ["config", "batch", *(h for h, _, _ in POINT_COLUMNS), "status"]
    body = []
    for row, flat in zip(rows, summary_rows(list(rows)), strict=True):
        cells = [fmt(flat.get(key), digits, flat.get(f"{key}_ci95")) for _, key, digits in POINT_COLUMNS]
        body.append([names[series_key(row)], str(flat["batch"]), *cells, str(flat["status"])])
    return table(headers, body)


def sweep_report(title: str, rows: Sequence[Row], verdicts: Sequence[str], plots: Sequence[Path]) -> str:
    failed = sum(r.get("status") != "ok" for r in rows)
    parts = [f"# {title}", f"{len(rows)} points, {failed} failed", points_table(rows)]
    if verdicts:
        parts.append("\n".join(f"- {line}" for line in verdicts))
    images = [p.name for p in plots if p.suffix == ".png"]
    if images:
        links = [f"![{Path(n).stem}]({n})" for n in images]
        parts.append("\n".join(["## Plots", "[interactive: plots.html](plots.html)", "", *links]))
    return "\n\n".join(parts) + "\n"
