"""One self-contained report.html per sweep or study, beside summary.csv: the verdict first, then the
points with their [lo, hi], the interactive figures, the settings that differ between points, the
failed points and why, and each point's folder and MLflow run. Built from the rows, verdict and
figure specs the markdown report and the PNGs use, so all three say the same thing.

Plotly's JavaScript is inlined once and a study's PNGs are embedded, so the page opens offline (a
cluster node, an MLflow artifact); it wraps rather than scrolls sideways on a 1280-pixel screen."""

from __future__ import annotations

import base64
import html
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from specexp import atomic, tracking
from specexp.config import TrackingConfig
from specexp.console import cell, fmt, load_cell, load_header
from specexp.metrics.methods import methods_line
from specexp.metrics.registry import header, table_keys
from specexp.report.fetch import SweepNotFound, folder_record
from specexp.report.figures import figures
from specexp.report.series import labels, series_key, settings
from specexp.report.summary import summary_rows
from specexp.report.verdict import METHODS_LEAD
from specexp.result import PointResult

REPORT = "report.html"
RunPage = Callable[[str | None], str]  # a run's page in MLflow's UI (None: the sweep's parent run)

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; padding: 12px 20px; max-width: 1240px;
  color: #222; overflow-wrap: anywhere; }
h1 { font-size: 20px; margin: 4px 0; } h2 { font-size: 16px; margin: 22px 0 6px; }
.meta, .how { color: #555; font-size: 12px; }
#verdict ul { margin: 6px 0; padding-left: 20px; } #verdict li { font-weight: 600; margin: 2px 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12.5px; }
th { text-align: right; vertical-align: bottom; padding: 3px 6px; border-bottom: 2px solid #999;
  overflow-wrap: normal; }
td { text-align: right; vertical-align: top; padding: 3px 6px; border-bottom: 1px solid #ddd;
  white-space: nowrap; font-variant-numeric: tabular-nums; }
th:nth-child(-n+2), td:first-child, td.config { text-align: left; } td.config { white-space: normal; min-width: 9em; }
.ci { display: block; color: #666; font-size: 11px; }
tr.failed td { background: #fff3f3; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 8px; }
.figures > * { min-width: 0; } img { max-width: 100%; }
pre { white-space: pre-wrap; margin: 2px 0 8px; font-size: 12px; background: #f6f6f6; padding: 4px; }
code { font-size: 12px; }
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _value(text: str) -> str:
    """A table cell's text with its interval, if any, on a line of its own beneath the value."""
    value, sep, bounds = text.partition(" [")
    return _e(value) + (f'<span class="ci">[{_e(bounds)}</span>' if sep else "")


def _link(href: str | None, text: str) -> str:
    return f'<a href="{_e(href)}">{_e(text)}</a>' if href else _e(text)


def _folder(row: PointResult, sweep_dir: Path) -> str | None:
    """The point's folder, relative to the report beside it (it moves with the sweep's folder)."""
    return None if not row.job_dir else Path(os.path.relpath(row.job_dir, sweep_dir)).as_posix() + "/"


def points_table(rows: Sequence[PointResult], chosen: Sequence[str], sweep_dir: Path, run_page: RunPage | None) -> str:
    """The points as the markdown table has them (config, tuned settings, load, metrics with [lo, hi],
    status), each linked to its folder and its MLflow run."""
    names = labels(series_key(r) for r in rows)
    flats = summary_rows(list(rows), chosen)
    keys = table_keys(flats)
    trials = ["trial"] if any("trial" in flat for flat in flats) else []
    heads = ["folder", "config", *trials, *chosen, load_header(flats), *(header(k) for k in keys), "status"]
    lines = ["<tr>" + "".join(f"<th>{_e(h)}</th>" for h in [*heads, "MLflow"]) + "</tr>"]
    for number, (row, flat) in enumerate(zip(rows, flats, strict=True), 1):
        where = _folder(row, sweep_dir)
        run = _link(run_page(row.run_id), "run") if run_page and row.run_id else "-"
        tuned = [fmt(flat.get(k) or None) for k in trials] + [fmt(flat.get(k)) for k in chosen]
        cells = [*tuned, load_cell(flat), *(cell(flat, k) for k in keys), str(flat["status"])]
        lines.append(
            f'<tr class="{"ok" if row.ok else "failed"}"><td>{_link(where, Path(where or str(number)).name)}</td>'
            f'<td class="config">{_e(names[series_key(row)])}</td>'
            + "".join(f"<td>{_value(c)}</td>" for c in cells)
            + f"<td>{run}</td></tr>"
        )
    how = methods_line(keys, flats)
    note = f'<p class="how">{_e(how)}</p>' if how else ""
    return f'<div class="scroll"><table id="points-table">{"".join(lines)}</table></div>{note}'


def differing(rows: Sequence[PointResult]) -> dict[str, list[str]]:
    """The settings that take more than one value across the points (the load included), each value
    once, in the order the points ran."""
    every = [dict(settings(r)) for r in rows]
    values = {k: list(dict.fromkeys(d.get(k, "-") for d in every)) for k in sorted({k for d in every for k in d})}
    return {k: v for k, v in values.items() if len(v) > 1}


def _settings_section(rows: Sequence[PointResult]) -> str:
    found = differing(rows)
    if not found:
        return "<p>Every point has the same settings.</p>"
    body = "".join(
        f'<tr><td class="config">{_e(k)}</td><td class="config">{_e(", ".join(v))}</td></tr>' for k, v in found.items()
    )
    return f'<table id="settings"><tr><th>setting</th><th>values</th></tr>{body}</table>'


def _failed_section(rows: Sequence[PointResult], sweep_dir: Path) -> str:
    names = labels(series_key(r) for r in rows)
    items = []
    for row in rows:
        if row.ok:
            continue
        where = _folder(row, sweep_dir)
        what = f"{names[series_key(row)]}, {load_cell(summary_rows([row])[0])}: {row.status}"
        items.append(f"<li>{_link(where, what)}<pre>{_e(row.error or 'no reason recorded')}</pre></li>")
    return f'<ul id="failures">{"".join(items)}</ul>' if items else "<p>None.</p>"


def _images(paths: Sequence[Path]) -> list[str]:
    """PNGs embedded in the page (a study's depth figure has no interactive twin)."""
    return [
        f'<img alt="{_e(p.stem)}" src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">'
        for p in paths
    ]


def page(
    title: str,
    rows: Sequence[PointResult],
    words: Sequence[str],
    chosen: Sequence[str],
    figures_html: Sequence[str],
    sweep_dir: Path,
    run_page: RunPage | None = None,
    mlflow_hint: str | None = None,
) -> str:
    """The report as one HTML document: verdict, points, figures, differing settings, failures."""
    failed = sum(not r.ok for r in rows)
    said = [w for w in words if not w.startswith(METHODS_LEAD)]
    how = [w for w in words if w.startswith(METHODS_LEAD)]
    verdict = (
        "<ul>" + "".join(f"<li>{_e(w)}</li>" for w in said) + "</ul>"
        if said
        else "<p>No verdict: no speculative point has a baseline (drafter=none) in this sweep.</p>"
    )
    verdict += "".join(f'<p class="how">{_e(w)}</p>' for w in how)
    meta = f"{len(rows)} points, {failed} failed · written {time.strftime('%Y-%m-%d %H:%M:%S %Z')}"
    if mlflow_hint and run_page:
        url = run_page(None)
        meta += " · in MLflow: " + _e(mlflow_hint).replace(_e(url), _link(url, url))
    figs = "".join(f"<div>{f}</div>" for f in figures_html) or "<p>No figure: no point finished ok.</p>"
    sections = [
        f'<header><h1>{_e(title)}</h1><p class="meta">{meta}</p></header>',
        f'<section id="verdict"><h2>Verdict</h2>{verdict}</section>',
        f'<section id="points"><h2>Points</h2>{points_table(rows, chosen, sweep_dir, run_page)}</section>',
        f'<section id="figures"><h2>Figures</h2><div class="figures">{figs}</div></section>',
        f'<section id="differ"><h2>Settings that differ between points</h2>{_settings_section(rows)}</section>',
        f'<section id="failed"><h2>Failed points</h2>{_failed_section(rows, sweep_dir)}</section>',
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
        + "\n".join(sections)
        + "\n</body></html>\n"
    )


def _mlflow(record: dict[str, Any]) -> tuple[RunPage | None, str | None]:
    """Each run's page in MLflow's UI and how to open the parent's, where the sweep has a parent run
    whose store answers; (None, None) otherwise: the report is still written, without links."""
    parent = record.get("parent_run_id")
    if not parent or not record.get("tracking"):
        return None, None
    cfg = TrackingConfig(**record["tracking"])
    try:
        exp_id = tracking.client(cfg).get_run(parent).info.experiment_id
    except Exception:
        return None, None
    return (lambda run_id: tracking.ui_url(cfg, exp_id, run_id or parent)), tracking.ui_hint(cfg, exp_id, parent)


def write_report(
    sweep_dir: Path,
    rows: Sequence[PointResult],
    words: Sequence[str],
    chosen: Sequence[str],
    crossovers: dict[str, float],
    files: Sequence[Path],
) -> Path:
    """``report.html`` in the sweep's folder, titled and linked from its record (sweep.json): a grid's
    figures interactive, a study's PNGs (among ``files``) embedded; returns its path."""
    try:
        record = folder_record(str(sweep_dir)) or {}
    except SweepNotFound:  # no sweep.json: a folder the report was asked to write into
        record = {}
    study = record.get("kind") == "study"
    sweep_id = record.get("sweep_id", sweep_dir.name)
    title = f"{'Study' if study else 'Sweep'} {sweep_id}"
    if (name := record.get("name")) and name != f"sweep-{sweep_id}":
        title += f": {name}"
    from specexp.report.plots import figure_divs  # plotly and matplotlib: only when a sweep ends

    drawn = [] if study else figure_divs(figures(rows, crossovers))
    shown = drawn or _images([p for p in files if p.suffix == ".png" and p.is_file()])
    run_page, hint = _mlflow(record)
    path = sweep_dir / REPORT
    atomic.write_text(path, page(title, rows, words, chosen, shown, sweep_dir, run_page, hint))
    return path
