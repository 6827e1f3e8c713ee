"""Console tables that fit the terminal (issue 38, item 4): at 80 columns every column shown holds
its values whole (an interval beneath its value where one line is too wide), the columns left out
are named, and a URL is printed on a line of its own that rich never breaks."""

from __future__ import annotations

import io

from rich.console import Console

from specexp.console import link_lines, points_table
from specexp.report.summary import summary_rows
from specexp.result import PointResult


def envelope() -> list[PointResult]:
    rows = []
    for drafter, speedups in (("none", {}), ("eagle3", {1: (2.0, 1.89, 2.12), 16: (0.5, 0.471, 0.53)})):
        for batch in (1, 16):
            m = {"output_throughput": 100.0 * batch, "output_throughput_ci95": 5.0 * batch, "windows": 5}
            m |= {"decode_speed": 100.0, "accept_length": 2.9, "ttft_ms_p50": 12.0, "ttft_ms_p99": 1234.5}
            if batch in speedups:
                m |= dict(zip(("speedup", "speedup_lo", "speedup_hi"), speedups[batch], strict=True))
            params = {"engine.name": "vllm", "drafter.name": drafter, "batch": batch}
            rows.append(PointResult.from_params("ok", params, metrics=m))
    return rows


def rate_sweep() -> list[PointResult]:
    rows = []
    for drafter in ("none", "eagle3"):
        for rate in (1.0, 16.0):
            m = {"output_throughput": 50.0 * rate, "output_throughput_ci95": 2.5 * rate, "windows": 5}
            m |= {"decode_speed": 123.4, "accept_length": 2.9, "ttft_ms_p50": 123.4, "tpot_ms_p50": 12.3}
            m |= {"offered_rate": rate, "achieved_rate": 0.98 * rate, "completion_rate": 0.95 * rate}
            m |= {"goodput": 0.8 * rate, "goodput_lo": 0.7 * rate, "goodput_hi": 0.9 * rate}
            m |= {"slo_attainment": 0.93, "slo_attainment_lo": 0.88, "slo_attainment_hi": 0.96}
            if drafter != "none":
                m |= {"decode_speedup": 1.31, "decode_speedup_lo": 1.12, "decode_speedup_hi": 1.52}
            params = {"engine.name": "vllm", "drafter.name": drafter, "load.kind": "rate", "load.rate": rate}
            rows.append(PointResult.from_params("ok", params, metrics=m))
    return rows


def rendered(rows: list[PointResult], width: int, wide: bool = False) -> str:
    out = Console(width=width, file=io.StringIO(), record=True)
    out.print(points_table(summary_rows(rows), "sweep", wide=wide))
    return out.export_text()


def test_an_envelope_at_80_columns_shows_every_kept_value_whole() -> None:
    text = rendered(envelope(), 80)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for whole in ("1,600", "[1,520, 1,680]", "2.00", "[1.89, 2.12]", "0.500", "[0.471, 0.530]", "eagle3"):
        assert whole in text, whole  # the headline columns: throughput and speedup, with intervals
    assert "not shown at this width:" in " ".join(text.split())  # what was left out is named
    assert "1,234.5" not in text  # the lowest-priority column (TTFT p99) is one of them


def test_a_rate_sweep_at_80_columns_keeps_its_answer_columns() -> None:
    text = rendered(rate_sweep(), 80)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for whole in ("16/s", "800", "[760, 840]", "1.31", "[1.12, 1.52]", "12.8", "[11.2, 14.4]"):
        assert whole in text, whole  # throughput, the per-stream speedup and goodput, whole
    flat = " ".join(text.split())
    assert "stream speedup" in flat and "goodput req/s" in flat


def test_wide_shows_every_column_on_one_line() -> None:
    text = rendered(rate_sweep(), 400, wide=True)
    flat = " ".join(text.split())
    for head in ("TTFT p50 ms", "offered req/s", "achieved req/s", "completed req/s", "SLO met", "accept len"):
        assert head in flat, head
    assert "0.930 [0.880, 0.960]" in text and "not shown" not in flat


def test_a_url_is_printed_on_a_line_of_its_own_never_broken() -> None:
    url = "http://127.0.0.1:5000/#/experiments/1/runs/" + "a" * 64
    lines = link_lines(
        "in MLflow", f"mlflow ui --backend-store-uri sqlite:///outputs/mlflow.db --port 5000, then {url}"
    )
    assert lines == ["in MLflow: mlflow ui --backend-store-uri sqlite:///outputs/mlflow.db --port 5000, then", url]
    out = Console(width=80, file=io.StringIO(), record=True)
    for line in lines:
        out.print(line, soft_wrap=True, markup=False)
    assert url in out.export_text().splitlines()
    assert link_lines("in MLflow", "no link here") == ["in MLflow: no link here"]
