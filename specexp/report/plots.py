"""The report's figures as PNGs (matplotlib, no display needed) and one self-contained plots.html
(plotly, its JavaScript embedded once) that opens offline, e.g. on a cluster node or from an artifact."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import plotly.graph_objects as go
from matplotlib.figure import Figure as MplFigure

from specexp.report.figures import Figure, Line, figures
from specexp.result import PointResult

_TAB10 = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def _colours(lines: Sequence[Line]) -> dict[str, int]:
    """One colour index per series, so a series' p50 and p99 lines match in both backends."""
    keys = dict.fromkeys(line.series or line.label for line in lines)
    return {k: i % len(_TAB10) for i, k in enumerate(keys)}


def _ticks(spec: Figure) -> list[float]:
    return sorted({x for line in spec.lines for x in line.x})


def _png(spec: Figure, path: Path) -> None:
    fig = MplFigure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    colours = _colours(spec.lines)
    for line in spec.lines:
        ax.errorbar(
            line.x,
            line.y,
            yerr=None if line.err is None else [[lo for lo, _ in line.err], [hi for _, hi in line.err]],
            label=line.label,
            color=_TAB10[colours[line.series or line.label]],
            linestyle="--" if line.dashed else "-",
            marker="o",
            markersize=4,
            capsize=3 if line.err else 0,
        )
    if spec.log2x:
        ax.set_xscale("log", base=2)
    ticks = _ticks(spec)
    ax.set_xticks(ticks, labels=[f"{t:g}" for t in ticks], minor=False)
    ax.minorticks_off()
    if spec.hline is not None:
        ax.axhline(spec.hline, color="black", linewidth=0.8)
    for lo, hi in spec.bands:
        ax.axvspan(lo, hi, color="grey", alpha=0.15, linewidth=0)
    for label, x in spec.vlines.items():
        ax.axvline(x, color="grey", linestyle=":")
        ax.text(x, 0.98, label, transform=ax.get_xaxis_transform(), rotation=90, va="top", ha="right", fontsize=8)
    ax.set(title=spec.title, xlabel=spec.xlabel, ylabel=spec.ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)


def _hover(line: Line) -> dict[str, object]:
    """Hover text that gives a point's 95% interval as [lo, hi], never ± half an asymmetric width; {}
    without intervals."""
    if not line.err:
        return {}
    bounds = [[y - below, y + above] for y, (below, above) in zip(line.y, line.err, strict=True)]
    return {"customdata": bounds, "hovertemplate": "%{x:g}: %{y:.4g}, 95% [%{customdata[0]:.4g}, %{customdata[1]:.4g}]"}


def plotly_figure(spec: Figure) -> go.Figure:
    fig = go.Figure()
    colours = _colours(spec.lines)
    for line in spec.lines:
        colour = _TAB10[colours[line.series or line.label]]
        fig.add_trace(
            go.Scatter(
                x=line.x,
                y=line.y,
                name=line.label,
                mode="lines+markers",
                line={"color": colour, "dash": "dash" if line.dashed else "solid"},
                error_y=(
                    {
                        "type": "data",
                        "symmetric": False,
                        "array": [hi for _, hi in line.err],
                        "arrayminus": [lo for lo, _ in line.err],
                        "visible": True,
                    }
                    if line.err
                    else None
                ),
                **_hover(line),
            )
        )
    ticks = _ticks(spec)
    fig.update_xaxes(type="log" if spec.log2x else "linear", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])
    if spec.hline is not None:
        fig.add_hline(y=spec.hline, line_color="black", line_width=1)
    for lo, hi in spec.bands:
        fig.add_vrect(x0=lo, x1=hi, fillcolor="grey", opacity=0.15, line_width=0)
    for label, x in spec.vlines.items():
        fig.add_vline(x=x, line_dash="dot", line_color="grey")
        # Annotations on a log axis take log10(x) while shapes take x (plotly.py#2580).
        at = math.log10(x) if spec.log2x else x
        fig.add_annotation(x=at, y=1, yref="paper", text=label, showarrow=False, textangle=-90, xanchor="right")
    fig.update_layout(title=spec.title, xaxis_title=spec.xlabel, yaxis_title=spec.ylabel, template="plotly_white")
    return fig


def figure_divs(specs: Sequence[Figure]) -> list[str]:
    """Each figure as an HTML fragment that takes its container's width (a laptop screen never scrolls
    sideways), plotly's JavaScript inlined in the first one only: the page opens offline."""
    return [
        plotly_figure(s).to_html(
            full_html=False,
            include_plotlyjs=i == 0,
            default_width="100%",
            default_height="440px",
            config={"responsive": True, "displaylogo": False},
        )
        for i, s in enumerate(specs)
    ]


def _html(specs: Sequence[Figure], path: Path) -> None:
    parts = figure_divs(specs)
    body = "\n".join(f'<section id="{s.name}">{p}</section>' for s, p in zip(specs, parts, strict=True))
    path.write_text(
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>specexp plots</title></head>\n<body>\n{body}\n'
        "</body></html>\n",
        encoding="utf-8",
    )


def make_plots(rows: Sequence[PointResult], crossovers: dict[str, float], out_dir: Path) -> list[Path]:
    """Write ``<figure>.png`` for each figure with data and ``plots.html`` with all of them; returns the paths.

    ``rows`` should already carry ``speedup`` where paired (analysis.pair_speedups) for the speedup figure.
    """
    specs = figures(rows, crossovers)
    if not specs:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in specs:
        paths.append(out_dir / f"{spec.name}.png")
        _png(spec, paths[-1])
    paths.append(out_dir / "plots.html")
    _html(specs, paths[-1])
    return paths
