"""Every interval is printed as [lo, hi], with its level and method said once per output (issue 33,
item 3): a log-scale ratio's interval is not symmetric, and ``± (hi − lo) / 2`` misstates both ends."""

import csv
from pathlib import Path

from rich.console import Console

from specexp.console import fmt, points_table
from specexp.metrics.methods import methods_line
from specexp.metrics.registry import table_keys
from specexp.metrics.stats import Estimate
from specexp.report.analysis import METHOD_TAG
from specexp.report.summary import summary_rows, write_csv
from specexp.result import PointResult

# The point: a speedup of 0.93 whose interval on the log scale is [0.62, 1.40].
SPEEDUP = Estimate(0.93, 0.172, 7, "log")


def rows() -> list[PointResult]:
    base = {"output_throughput": 100.0, "output_throughput_ci95": 4.0, "windows": 8.0}
    spec = base | {"output_throughput": 93.0, "windows_paired": 8.0, "speedup": SPEEDUP.value}
    spec |= {"speedup_ci95": SPEEDUP.half, "speedup_lo": SPEEDUP.lo, "speedup_hi": SPEEDUP.hi}
    return [
        PointResult("ok", "torch", "tiny", name, 4, params={"drafter.name": name, "batch": 4}, metrics=metrics)
        for name, metrics in (("none", base), ("tiny", spec))
    ]


def test_an_asymmetric_interval_reads_as_its_ends() -> None:
    assert (round(SPEEDUP.lo, 2), round(SPEEDUP.hi, 2)) == (0.62, 1.4)
    shown = fmt(SPEEDUP.value, 2, SPEEDUP.half, (SPEEDUP.lo, SPEEDUP.hi))
    assert shown == "0.93 [0.62, 1.40]" and "±" not in shown
    assert fmt(660.0, 1, 105.0) == "660 [555, 765]"  # a symmetric one too: one form everywhere
    assert fmt(660.0, 1) == "660.0" and fmt(None) == "-"


def test_the_console_table_prints_bounds_and_says_once_how_they_were_made() -> None:
    flats = summary_rows(rows())
    out = Console(width=250, record=True)
    out.print(points_table(flats, "points"))
    text = out.export_text()
    assert "0.93 [0.62, 1.40]" in text and "100.0 [96.0, 104.0]" in text and "±" not in text
    how = methods_line(["output_throughput", "speedup"], flats)
    assert how == (
        "[lo, hi]: 95% intervals; output tok/s: Student-t over 8 windows; speedup: arms' pooled windows "
        "(tokens over seconds), paired t over 8 window pairs (log scale)"
    )
    assert " ".join(how.split()) in " ".join(text.split())  # the caption wraps to the table's width


def test_summary_csv_holds_each_interval_as_its_ends(tmp_path: Path) -> None:
    write_csv(tmp_path / "summary.csv", summary_rows(rows()))
    with (tmp_path / "summary.csv").open() as f:
        reader = csv.DictReader(f)
        header, (_, spec) = reader.fieldnames, list(reader)
    at = header.index("output_throughput")
    assert header[at : at + 4] == ["output_throughput", *(f"output_throughput_{s}" for s in ("ci95", "lo", "hi"))]
    assert (float(spec["output_throughput_lo"]), float(spec["output_throughput_hi"])) == (89.0, 97.0)
    assert float(spec["speedup_lo"]) == SPEEDUP.lo and float(spec["speedup_hi"]) == SPEEDUP.hi


def test_a_rate_table_shows_the_completions_beside_the_offered_and_achieved_rates() -> None:
    """The achieved rate reads the offered one by construction; saturation shows in the completions."""
    row = {"load.kind": "rate", "offered_rate": 1.0, "achieved_rate": 1.0, "completion_rate": 0.62}
    assert table_keys([row])[-3:] == ("offered_rate", "achieved_rate", "completion_rate")


def test_summary_csv_says_how_each_speedup_was_estimated(tmp_path: Path) -> None:
    points = rows()
    points[1].tags[METHOD_TAG] = "paired"  # as report.analysis.apply tags a point with a speedup
    write_csv(tmp_path / "summary.csv", summary_rows(points))
    with (tmp_path / "summary.csv").open() as f:
        base, spec = csv.DictReader(f)
    assert (base["speedup_method"], spec["speedup_method"]) == ("", "paired")  # a baseline has no speedup
    assert "speedup_method" not in summary_rows(rows())[1]  # no speedup in the sweep: no column
