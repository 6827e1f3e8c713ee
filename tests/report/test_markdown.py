"""Report tables that read right: no empty or doubled columns, comparison ratios with intervals,
cells that stay cells whatever a setting holds."""

from specexp.metrics.stats import estimate
from specexp.report.compare import changed_settings, ratio
from specexp.report.fetch import Sweep
from specexp.report.markdown import escape, points_markdown, points_methods, sweep_report, table
from specexp.result import PointResult


def point(drafter: str, windows: list[float], **params) -> PointResult:
    e = estimate(windows)
    metrics = {"output_throughput": e.value, "output_throughput_ci95": e.half, "windows": len(windows)}
    params = {"engine.name": "torch", "model.name": "tiny", "drafter.name": drafter, "batch": 4, **params}
    return PointResult("ok", "torch", "tiny", drafter, 4, params=params, metrics=metrics)


def test_a_multi_line_setting_stays_in_its_cell() -> None:
    fmt_text = "Answer briefly.\n\n{prompt}\n| end"
    lines = table(["config", "workload.prompt_format"], [["torch/tiny", fmt_text]]).splitlines()
    assert len(lines) == 3 and lines[2] == "| torch/tiny | Answer briefly.<br><br>{prompt}<br>\\| end |"
    assert escape("a\r\nb") == "a<br>b"
    rows = [point("tiny", [1.0, 2.0], **{"workload.prompt_format": fmt_text})]
    text = points_markdown(rows, ["workload.prompt_format"])
    assert len(text.splitlines()) == 3
    assert "| 1.5 [-4.9, 7.9] |" in text  # an interval as [lo, hi], never ± half its width
    how = "[lo, hi]: 95% intervals; output tok/s: Student-t over 2 windows"
    assert points_methods(rows) == how and f"\n\n{how}\n" in sweep_report("t", rows, [], [])


def test_a_grids_swept_group_and_a_rate_sweeps_rate_are_not_columns_of_their_own() -> None:
    rows = [point("none", [1.0, 2.0]), point("tiny", [2.0, 3.0], **{"decode": 4})]
    params = {"swept.drafter": "none,tiny", "swept.batch": "1,4", "swept.rate": "1,2", "swept.decode": "1,4"}
    assert Sweep("s", "p", "n", rows, "grid", params).settings == ["decode"]


def test_comparison_ratios_carry_their_interval() -> None:
    a, b = point("tiny", [100.0, 102.0, 98.0]), point("tiny", [110.0, 112.0, 108.0])
    r = ratio(a, b, "output_throughput")
    assert abs(r.value - 1.1) < 1e-9 and 0 < r.half < 0.1
    assert ratio(a, PointResult("failed", "torch", "tiny", "tiny", 4), "output_throughput") is None
    before = point("tiny", [1.0, 2.0], **{"workload.prompt_format": "x\ny"})
    after = point("tiny", [1.0, 2.0], **{"workload.prompt_format": "{prompt}"})
    assert changed_settings([before], [after]) == {"workload.prompt_format": ("x\ny", "{prompt}")}
