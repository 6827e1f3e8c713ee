"""Plots from hand-made rows: every figure with data is drawn, as PNG and in one offline HTML."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specexp.report.analysis import apply
from specexp.report.figures import figures
from specexp.report.plots import make_plots
from specexp.result import PointResult

SPEEDUPS = {1: 2.0, 2: 1.5, 4: 1.2, 8: 0.8, 16: 0.5}


def row(
    drafter: str, batch: int, tput: float, engine: str = "torch", steps: int = 4, status: str = "ok"
) -> PointResult:
    metrics = {
        "output_throughput": tput,
        "output_throughput_ci95": 0.05 * tput,
        "windows": 5,
        "decode_speed": tput / batch,
        "accept_length": 1.0 if drafter == "none" else 3.0,
        "ttft_ms_p50": 10.0 * batch,
        "ttft_ms_p99": 20.0 * batch,
        "tpot_ms_p50": 5.0 + batch,
        "tpot_ms_p99": 9.0 + batch,
    }
    if drafter != "none":
        metrics |= {f"accept_rate_pos_{i}": 0.9 ** (i + 1) for i in range(steps)}
    params = {"engine.name": engine, "model.name": "tiny", "drafter.name": drafter, "batch": batch, "sweep_id": "s"}
    params["drafter.num_steps"] = 0 if drafter == "none" else steps
    return PointResult.from_params(status, params, metrics=metrics)


def paired(rows: list[PointResult]) -> tuple[list[PointResult], dict[str, float]]:
    return rows, apply(rows).crossovers


def sweep() -> tuple[list[PointResult], dict[str, float]]:
    rows = [row("none", b, 100.0 * b) for b in SPEEDUPS]
    rows += [row("tiny", b, 100.0 * b * s) for b, s in SPEEDUPS.items()]
    rows.append(row("tiny", 32, 1.0, engine="vllm", status="failed"))
    return paired(rows)


def json_strings(html: str, field: str) -> set[str]:
    """Plotly escapes "/" and non-ASCII in its JSON; read the strings back as JSON."""
    return {json.loads(s) for s in re.findall(rf'"{field}":("(?:[^"\\]|\\.)*")', html)}


def test_every_figure_as_png_and_one_offline_html(tmp_path: Path) -> None:
    rows, cross = sweep()
    paths = make_plots(rows, cross, tmp_path / "plots")
    names = {p.name for p in paths}
    expected = ["output_throughput", "speedup", "decode_speed", "decode_speedup", "accept_length", "accept_rate_pos"]
    expected += ["ttft", "tpot"]
    assert names == {f"{n}.png" for n in expected} | {"plots.html"}
    for path in paths:
        assert path.exists()
        if path.suffix == ".png":
            assert path.read_bytes()[:4] == b"\x89PNG"
            assert path.stat().st_size > 10_000
    html = (tmp_path / "plots" / "plots.html").read_text(encoding="utf-8")
    assert "<script src=" not in html and html.count("plotly.js v") == 1  # embedded once: opens offline
    assert {"torch/none", "torch/tiny", "torch/tiny p99", "torch/tiny b=4"} <= json_strings(html, "name")
    assert "tiny crossover ≈ 5.7 [4.9, 6.3]" in json_strings(html, "text")
    assert not any("vllm" in name for name in json_strings(html, "name"))  # the failed point is left out
    assert '"error_y":{"array":[5.0,10.0,20.0,40.0,80.0]' in html  # output_throughput_ci95 of the baseline
    assert '"customdata":[[95.0,105.0],[190.0,210.0],' in html  # hover: the baseline's interval as [lo, hi]
    assert "%{x:g}: %{y:.4g}, 95% [%{customdata[0]:.4g}, %{customdata[1]:.4g}]" in json_strings(html, "hovertemplate")


def test_speedup_figure_marks_the_crossover_and_parity() -> None:
    rows, cross = sweep()
    spec = next(f for f in figures(rows, cross) if f.name == "speedup")
    assert spec.hline == 1.0
    assert spec.vlines == {"tiny crossover ≈ 5.7 [4.9, 6.3]": pytest.approx(2**2.5)}
    assert spec.bands == [(cross["crossover_batch.tiny_lo"], cross["crossover_batch.tiny_hi"])]  # shaded
    assert [line.label for line in spec.lines] == ["torch/tiny"]
    assert spec.lines[0].x == [1, 2, 4, 8, 16]
    assert spec.lines[0].y == pytest.approx(list(SPEEDUPS.values()))


def test_figures_without_data_are_skipped(tmp_path: Path) -> None:
    rows = [row("none", b, 100.0 * b) for b in (1, 2)]
    for r in rows:
        del r.metrics["ttft_ms_p50"], r.metrics["ttft_ms_p99"]
    names = {p.name for p in make_plots(rows, {}, tmp_path)}
    assert "speedup.png" not in names and "accept_rate_pos.png" not in names and "ttft.png" not in names
    assert "output_throughput.png" in names
    assert make_plots([row("tiny", 1, 1.0, status="failed")], {}, tmp_path / "none") == []


def test_series_named_by_what_tells_them_apart() -> None:
    rows = [row("none", b, 100.0 * b) for b in (1, 2)]
    rows += [row("tiny", b, 150.0 * b, steps=s) for b in (1, 2) for s in (2, 4)]
    rows, cross = paired(rows)
    spec = next(f for f in figures(rows, cross) if f.name == "output_throughput")
    assert [line.label for line in spec.lines] == [
        "torch/none",
        "torch/tiny drafter.num_steps=2",
        "torch/tiny drafter.num_steps=4",
    ]


def test_launches_of_one_point_are_one_marker_with_their_combined_interval() -> None:
    rows = []
    for repeat, tput in enumerate((90.0, 110.0)):  # two launches of each point, 20% apart
        for r in (row("none", 4, tput), row("tiny", 4, 1.5 * tput)):
            r.params["repeat"] = repeat
            rows.append(r)
    rows, cross = paired(rows)
    spec = next(f for f in figures(rows, cross) if f.name == "output_throughput")
    baseline = next(line for line in spec.lines if line.label == "torch/none")
    assert baseline.x == [4.0] and baseline.y == pytest.approx([100.0])
    assert baseline.err[0][0] > 10.0  # the launches' spread (t with one degree of freedom), not one launch's windows
