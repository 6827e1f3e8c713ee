"""One speedup everywhere: a point whose windows differ in length, where the three speedups once computed
(the geometric mean of the pairs' ratios, the ratio of the arms' mean window rates, and their tokens over
their seconds) differ by several percent, reads one answer in every output: the arms' tokens over their
seconds, paired or not."""

import math

import numpy as np
import pytest

from specexp.config import MeasureConfig
from specexp.metrics.window_results import aggregate
from specexp.report import schedule, study
from specexp.report.analysis import apply
from specexp.report.breakeven import batch_speedups
from specexp.report.compare import ratio as compare_ratio
from specexp.report.verdict import verdicts
from specexp.result import PointResult

BASE = ([100.0, 300.0, 200.0, 150.0], [1.0, 2.0, 1.0, 1.5])  # output tokens, window seconds
SPEC = ([250.0, 330.0, 290.0, 150.0], [1.0, 3.0, 1.2, 1.5])


def point(drafter: str, sums: tuple[list[float], list[float]], starts: list[float], batch: int = 4) -> PointResult:
    windows = [
        {"output_throughput": t / s, "window_output_tokens": t, "window_s": s, "window_start": t0, "window_end": t0 + s}
        for t, s, t0 in zip(*sums, starts, strict=True)
    ]
    params = {"engine.name": "torch", "drafter.name": drafter, "drafter.num_steps": 0 if drafter == "none" else 4}
    row = PointResult.from_params("ok", params | {"batch": batch, "sweep_id": "s"}, windows=windows)
    row.metrics = aggregate(windows, MeasureConfig(windows=len(windows)))
    return row


def rates(sums: tuple[list[float], list[float]]) -> np.ndarray:
    return np.array(sums[0]) / np.array(sums[1])


POOLED = (sum(SPEC[0]) / sum(SPEC[1])) / (sum(BASE[0]) / sum(BASE[1]))


def test_the_three_old_speedups_differ_at_this_point() -> None:
    geometric = math.exp(np.mean(np.log(rates(SPEC) / rates(BASE))))
    of_means = rates(SPEC).mean() / rates(BASE).mean()
    assert min(abs(geometric / POOLED - 1), abs(of_means / POOLED - 1), abs(geometric / of_means - 1)) > 0.04


def test_every_output_reads_the_arms_tokens_over_their_seconds() -> None:
    turns = [point("none", BASE, [0.0, 5.5, 8.0, 12.0]), point("tiny", SPEC, [1.0, 2.5, 9.0, 10.5])]
    after = [point("none", BASE, [0.0, 1.0, 3.0, 4.0]), point("tiny", SPEC, [6.0, 7.0, 10.0, 11.2])]
    for rows, method in ((turns, "paired"), (after, "unpaired")):
        analysis = apply(rows)
        m = rows[1].metrics
        assert rows[1].tags["specexp.speedup_method"] == method
        assert m["speedup"] == pytest.approx(POOLED) and m["speedup_unpaired"] == pytest.approx(POOLED)
        assert m["output_throughput_pooled"] / rows[0].metrics["output_throughput_pooled"] == pytest.approx(POOLED)
        assert batch_speedups(rows)[4].value == pytest.approx(POOLED)  # the break-even search's
        assert analysis.series[0].points[4.0].value == pytest.approx(POOLED)  # the verdict's and break-even's
        assert f"×{POOLED:.2f}" in verdicts(rows, analysis)[0]
        estimate, how = schedule.comparer("output_throughput")(rows[1:], rows[:1])  # a depth schedule's
        assert estimate.value == pytest.approx(POOLED) and how == method
        assert compare_ratio(rows[0], rows[1], "output_throughput").value == pytest.approx(POOLED)  # report compare


def test_an_unpaired_point_among_paired_ones_is_marked_in_the_verdict() -> None:
    base = ([100.0, 210.0, 100.0, 150.0], [1.0, 2.0, 1.0, 1.5])
    spec = ([t * f for t, f in zip(base[0], (2.0, 2.05, 1.95, 2.02), strict=True)], base[1])
    rows = [point("none", base, [0.0, 3.0, 7.0, 9.0]), point("tiny", spec, [1.0, 5.0, 8.0, 10.5])]
    rows += [point("none", base, [20.0, 21.0, 23.0, 24.0], 8), point("tiny", spec, [26.0, 27.0, 29.0, 30.0], 8)]
    line, how = verdicts(rows, apply(rows))
    assert line.count(" unpaired") == 1 and line.endswith("to ×2.02 [1.87, 2.17] unpaired)")  # batch 8
    assert "paired t over 4 window pairs (log scale), unpaired Welch t (log scale) at 1 of 2 points" in how


def test_a_study_tells_its_arms_apart_on_the_same_estimand() -> None:
    """A study's ties read each arm's tokens over its seconds, its trials' windows pooled, as the verdict
    does. Here the ratio of the arms' mean window rates (×0.80 [0.50, 1.29]) holds 1, their tokens over
    seconds (×0.68 [0.48, 0.96]) does not: depth 4's long windows are slow ones."""
    deep = point("tiny", ([90.0, 239.0, 230.0, 105.0], [1.0, 4.0, 4.0, 1.0]), [0.0, 1.0, 5.0, 9.0])
    flat = point("none", ([197.0, 201.0, 192.0, 97.0], [2.0, 2.0, 2.0, 1.0]), [20.0, 22.0, 24.0, 26.0])
    again = point("tiny", SPEC, [30.0, 31.0, 33.0, 34.2])  # a second trial of depth 4
    for trial, row in enumerate([deep, flat, again]):
        row.tags[study.TRIAL] = str(trial)
    (line,) = study.best_per_batch([deep, flat], ["drafter.num_steps"], "output_throughput", maximize=True)
    assert line.startswith("best at batch 4: drafter.num_steps=0") and "no single best" not in line
    shallow, pooled = study.arms([flat, deep, again], ["drafter.num_steps"], "output_throughput")[4]
    ratio = study.versus(pooled, shallow, "output_throughput")  # the second trial's windows join its arm's
    tokens, seconds = 90 + 239 + 230 + 105 + sum(SPEC[0]), 10 + sum(SPEC[1])
    assert ratio is not None and ratio.value == pytest.approx((tokens / seconds) / (687 / 7))
