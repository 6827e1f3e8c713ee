"""The batch x context-length map, from points as a search at several prompt lengths records them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from matplotlib.image import imread

from specexp import tracking
from specexp.config import TrackingConfig
from specexp.report.__main__ import main
from specexp.report.crossover_map import draw_map, speedup_map
from specexp.report.crossover_points import believed_map
from specexp.result import PointResult


def _points(length: int, at: float, batches: list[int]) -> list[PointResult]:
    """Both arms at each batch, the drafter's throughput falling through the baseline's at ``at``."""
    rows = []
    for b in batches:
        speedup = 1 - 0.15 * (math.log2(b) - math.log2(at))
        for drafter, tps in (("none", 1000.0), ("tiny", 1000.0 * speedup)):
            params = {"workload.input_len": length, "batch": b, "drafter.name": drafter}
            metrics = {"output_throughput": tps, "output_throughput_ci95": 0.02 * tps, "windows": 3}
            rows.append(PointResult(status="ok", drafter=drafter, batch=b, params=params, metrics=metrics))
    return rows


def test_speedups_by_length_and_batch() -> None:
    rows = _points(16, 6.0, [1, 64, 6]) + _points(512, 24.0, [1, 64, 24, 20])
    found = speedup_map(rows)
    assert list(found) == ["16", "512"] and list(found["512"]) == [1, 20, 24, 64]
    assert found["16"][6].value == pytest.approx(1.0) and found["512"][1].value > found["16"][1].value


def test_the_map_is_drawn_for_two_lengths_or_more(tmp_path: Path) -> None:
    rows = _points(16, 6.0, [1, 64, 6, 7]) + _points(128, 10.0, [1, 64, 9, 10]) + _points(512, 24.0, [1, 64, 24])
    path = draw_map(rows, tmp_path / "plots" / "crossover_map.png")
    assert path is not None and imread(path).shape[0] > 300
    assert draw_map(_points(16, 6.0, [1, 64]), tmp_path / "one.png") is None  # one length: no map
    assert not (tmp_path / "one.png").exists()


def test_an_unsettled_batch_is_not_drawn_as_measured(tmp_path: Path) -> None:
    rows = _points(16, 6.0, [1, 64, 6]) + _points(128, 10.0, [1, 64, 10, 3])
    unsettled = next(r for r in rows if r.params["workload.input_len"] == 128 and r.batch == 3 and r.speculative)
    unsettled.metrics["windows_settled"] = 0.0
    found = believed_map(rows)
    assert list(found["128"].settled) == [1, 10, 64] and found["128"].aside == {3: "unsettled"}
    assert 3 not in speedup_map(rows)["128"]
    assert draw_map(rows, tmp_path / "map.png") is not None


def test_dataset_buckets_are_rows_of_the_map_by_their_lower_bound(tmp_path: Path) -> None:
    rows = _points(16, 6.0, [1, 64, 6]) + _points(128, 10.0, [1, 64, 10])
    for r in rows:  # the same points as a dataset's length buckets
        r.params |= {
            "workload.kind": "humaneval",
            "workload.length_bucket": "128-512" if r.params["workload.input_len"] == 16 else "0-128",
        }
    assert list(speedup_map(rows)) == ["0-128", "128-512"]
    assert draw_map(rows, tmp_path / "map.png") is not None
    for r in rows:  # a dataset's prompts whatever their length: no context length to map
        r.params["workload.length_bucket"] = None
    assert speedup_map(rows) == {}


def test_the_report_of_a_map_sweep_carries_the_map_and_its_table(tmp_path: Path) -> None:
    """``python -m specexp.report`` on a map sweep read back from a real MLflow store: the heatmap
    among the plots, the table of speedups per context length and batch with each break-even, and
    an unsettled batch shown as set aside rather than with a value."""
    cfg = TrackingConfig(uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment="specexp")
    tracking.start_parent(cfg, tmp_path, "map-a", "sweep-map-a", {})
    rows = _points(16, 6.0, [1, 64, 6]) + _points(512, 24.0, [1, 64, 24, 12])
    for r in rows:
        r.metrics["windows_settled"] = (
            0.0 if (r.params["workload.input_len"], r.batch, r.drafter) == (512, 12, "tiny") else 1.0
        )
        params = r.params | {"engine.name": "torch", "model.name": "tiny", "sweep_id": "map-a", "max_batch": 64}
        params |= {"workload.kind": "random", "workload.length_bucket": None}  # as every point logs them
        tags = {"specexp.sweep_id": "map-a", "specexp.status": "ok"}
        name = f"{r.drafter}-b{r.batch}-n{r.params['workload.input_len']}"
        tracking.log_point(cfg, tmp_path, name, r.metrics, params, tags, [], "FINISHED", "map-a")
    out = tmp_path / "report"
    assert main(["map-a", "--tracking-uri", cfg.uri, "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "## Break-even map" in text and "![crossover_map](crossover_map.png)" in text
    assert imread(out / "crossover_map.png").shape[0] > 300
    table = [line for line in text.split("## Break-even map", 1)[1].splitlines() if line.startswith("| ")]
    header, _, short, long = ([c.strip() for c in line.strip("|").split("|")] for line in table)
    assert header == ["prompt tokens", "batch 1", "batch 6", "batch 12", "batch 24", "batch 64", "break-even (95%)"]
    assert short[0] == "16" and short[2].startswith("1.000 [") and short[3] == ""  # 16 tokens: batch 12 not measured
    assert long[3] == "set aside (unsettled)" and long[-1].startswith("24.0 [")
    assert "prompt tokens 512: set aside: batch 12 (a cap stopped an arm" in text
