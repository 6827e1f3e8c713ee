"""The required-acceptance map from points as +sweep=required_acceptance records them: synthetic arms
at several acceptance lengths, drafter=none, and a real drafter, at three batches."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from matplotlib.image import imread

from specexp.report.__main__ import report
from specexp.report.fetch import Sweep
from specexp.report.required import SYNTHETIC_TAG, placed, required, table, write
from specexp.result import PointResult

NEEDS = {1: 2.0, 4: 3.0, 16: 4.0}  # batch -> the acceptance length at which the drafter's speedup is 1
ALPHAS = [1.0, 2.0, 3.0, 4.0, 5.0]


def rates(alpha: float, depth: int = 4) -> str:
    """vLLM's minimum-variance rates for a length, as the point's tag carries them."""
    full = int(alpha - 1)
    return ",".join(f"{r:g}" for r in ([1.0] * full + [alpha - 1 - full] + [0.0] * depth)[:depth])


def row(drafter: str, batch: int, tps: float, **extra) -> PointResult:
    params = {"batch": batch, "drafter.name": drafter, "drafter.num_steps": 0 if drafter == "none" else 4}
    metrics = {"output_throughput": tps, "output_throughput_ci95": 0.01 * tps, "windows": 5, **extra}
    return PointResult(status="ok", drafter=drafter, batch=batch, params=params, metrics=metrics)


def map_rows(real_alpha: float = 2.5, top: float = 5.0, real_speedup: float | None = None) -> list[PointResult]:
    """Speedup alpha / NEEDS[batch] (1 exactly at NEEDS), the real drafter at ``real_alpha`` (its speedup
    ``real_speedup`` where given, else what the map says at its α)."""
    rows = []
    for b, need in NEEDS.items():
        rows.append(row("none", b, 1000.0))
        for a in (x for x in ALPHAS if x <= top):
            point = row(f"tiny_synthetic{a:g}", b, 1000.0 * a / need, accept_length=a)
            point.tags[SYNTHETIC_TAG] = rates(a)
            rows.append(point)
        rows.append(row("tiny", b, 1000.0 * (real_speedup or real_alpha / need), accept_length=real_alpha))
    return rows


def with_categories(rows: list[PointResult], alphas: dict[str, float]) -> list[PointResult]:
    """Each point's prompts in categories (specexp.metrics.categories' keys), the real drafter's
    acceptance per category as ``alphas`` says."""
    for r in rows:
        for category, alpha in alphas.items():
            r.metrics |= {f"requests_ok.{category}": 6, f"output_throughput.{category}": r.metrics["output_throughput"]}
            if r.drafter == "tiny":
                r.metrics[f"accept_length.{category}"] = alpha
    return rows


def test_alpha_star_is_where_the_speedup_reaches_one_with_its_interval() -> None:
    found = {r.batch: r for r in required(map_rows())}
    assert list(found) == [1, 4, 16]
    for b, need in NEEDS.items():
        assert found[b].depth == 4 and found[b].alpha_star == pytest.approx(need)
        assert found[b].lo < need < found[b].hi < need + 0.3  # 1% throughput intervals: a narrow band


def test_beyond_the_map_is_said_so() -> None:
    found = {r.batch: r for r in required(map_rows(top=3.0))}  # alpha measured up to 3 only
    assert found[16].alpha_star == math.inf and found[16].words() == "never pays up to α 3.00"
    assert found[1].words().startswith("needs α* 2.00 [")


def test_csv_figure_and_table_with_the_real_drafter(tmp_path: Path) -> None:
    files, lines = write(map_rows(), tmp_path)
    names = ["required_acceptance.csv", "required_acceptance.json", "required_acceptance.png"]
    assert [f.name for f in files] == names
    table = list(csv.DictReader((tmp_path / "required_acceptance.csv").open()))
    assert [(r["batch"], r["depth"], round(float(r["alpha_star"]), 6)) for r in table] == [
        ("1", "4", 2.0),
        ("4", "4", 3.0),
        ("16", "4", 4.0),
    ]
    assert float(table[0]["lo"]) < 2.0 < float(table[0]["hi"])
    assert imread(files[-1]).shape[0] > 300
    assert lines[0].startswith("at batch 1 (depth 4): needs α* 2.00 [") and lines[0].endswith(
        "tiny has α 2.50 (enough)"
    )
    assert lines[2].endswith("tiny has α 2.50 (short of it)")
    assert write([r for r in map_rows() if SYNTHETIC_TAG not in r.tags], tmp_path / "none") == ([], [])


def test_the_report_adds_the_table_and_the_csv(tmp_path: Path) -> None:
    text = report(Sweep("s1", "p1", "sweep-s1", map_rows()), tmp_path, plots=False)
    assert "## Required acceptance length" in text and "- at batch 16 (depth 4): needs α* 4.00 [" in text
    assert (tmp_path / "required_acceptance.csv").exists()


def test_each_category_is_placed_beside_its_drafter(tmp_path: Path) -> None:
    files, lines = write(with_categories(map_rows(), {"code": 3.5, "chat": 1.5}), tmp_path)
    assert lines[0].endswith(
        "; tiny has α 2.50 (enough); tiny (chat) has α 1.50 (short of it); tiny (code) has α 3.50 (enough)"
    )
    assert lines[2].endswith("tiny (code) has α 3.50 (short of it)")  # batch 16 needs 4
    assert imread(files[-1]).shape[0] > 300  # the categories' markers drawn beside the stars


def test_a_loss_measured_above_alpha_star_or_an_alpha_inside_its_interval_is_cannot_tell() -> None:
    rows = map_rows(real_alpha=3.0, real_speedup=0.9)  # α 3 is above α* 2 at batch 1, yet tiny lost 10%
    lines = table(required(rows), placed(rows))
    assert lines[0].endswith("tiny has α 3.00 (cannot tell: it measured a loss above α*, speedup 0.90 [0.89, 0.91])")
    assert lines[2].endswith("tiny has α 3.00 (short of it)")  # batch 16: below α* 4, and it lost
    rows = map_rows(real_alpha=3.0)  # at batch 4 α* is 3.00 [2.97, 3.04]: no telling which side
    assert table(required(rows), placed(rows))[1].endswith("tiny has α 3.00 (cannot tell: inside α*'s interval)")
