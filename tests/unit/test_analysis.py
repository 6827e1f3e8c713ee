"""Sweep-level analysis on hand-made rows with known answers: pairing, crossovers and their
intervals, the dip that must be flagged, and the verdict in words."""

import math

import numpy as np
import pytest
from scipy import stats

from specexp.config import MeasureConfig
from specexp.metrics.stats import Estimate
from specexp.metrics.window_results import aggregate
from specexp.report.analysis import (
    alternated,
    apply,
    breaks_trend,
    crossover,
    crossover_interval,
    pair_speedups,
)
from specexp.report.verdict import verdicts
from specexp.result import PointResult


def row(
    drafter: str,
    batch: int,
    tput: float,
    engine: str = "torch",
    decode: float = 10.0,
    rel_ci: float | None = None,
    repeat: int = 0,
) -> PointResult:
    metrics = {"output_throughput": tput, "decode_speed": decode}
    if rel_ci is not None:
        metrics |= {"output_throughput_ci95": rel_ci * tput, "windows": 5}
    params = {
        "engine.name": engine,
        "drafter.name": drafter,
        "drafter.num_steps": 0 if drafter == "none" else 4,
        "batch": batch,
        "sweep_id": "s",
        "max_batch": 16,
        "repeat": repeat,
        "measure.windows": 5,
    }
    return PointResult.from_params("ok", params, metrics=metrics)


SPEEDUPS = {1: 2.0, 2: 1.5, 4: 1.2, 8: 0.8, 16: 0.5}


def sweep(engine: str = "torch", speedups: dict = SPEEDUPS, rel_ci: float | None = None) -> list[PointResult]:
    rows = [row("none", b, 100.0 * b, engine, rel_ci=rel_ci) for b in speedups]
    rows += [row("tiny", b, 100.0 * b * s, engine, decode=20.0, rel_ci=rel_ci) for b, s in speedups.items()]
    return rows


def test_pairs_each_speculative_point_with_its_baseline() -> None:
    rows = sweep()
    speedups = pair_speedups(rows)
    assert sorted(speedups) == [5, 6, 7, 8, 9]
    assert [speedups[i]["speedup"] for i in range(5, 10)] == pytest.approx(list(SPEEDUPS.values()))
    assert speedups[5]["decode_speedup"] == pytest.approx(2.0)
    assert "speedup_ci95" not in speedups[5]  # one window each: no interval


def test_crossover_interpolates_in_log2_batch() -> None:
    # wins at 4 (1.2), loses at 8 (0.8): halfway in log2 between 4 and 8
    assert crossover(list(SPEEDUPS.items())) == pytest.approx(2**2.5)
    assert apply(sweep()).crossovers == {"crossover_batch.tiny": pytest.approx(2**2.5)}


def test_no_crossover_when_always_or_never_winning() -> None:
    assert crossover([(1, 1.5), (4, 1.1)]) is None
    assert crossover([(1, 0.9), (4, 0.5)]) is None


def test_failed_baseline_gives_no_speedup() -> None:
    rows = sweep()
    rows[0].status = "failed"
    assert 5 not in pair_speedups(rows)


def test_two_engines_get_a_crossover_each() -> None:
    out = apply(sweep("torch") + sweep("vllm")).crossovers
    assert set(out) == {"crossover_batch.tiny.torch", "crossover_batch.tiny.vllm"}


def test_two_workloads_are_told_apart_by_their_names_not_their_prompt_formats() -> None:
    def on(workload: str, fmt: str) -> list[PointResult]:
        rows = sweep()
        for r in rows:
            r.params |= {"workload.name": workload, "workload.prompt_format": fmt, "workload.api": workload}
        return rows

    rows = on("humaneval", "Complete the following Python function.\n\n```python\n{prompt}```") + on(
        "random", "{prompt}"
    )
    assert set(apply(rows).crossovers) == {"crossover_batch.tiny.humaneval", "crossover_batch.tiny.random"}
    rows = on("mine", "a {prompt}") + on("mine", "b {prompt}")  # one name: the settings that differ
    assert set(apply(rows).crossovers) == {"crossover_batch.tiny.a {prompt}", "crossover_batch.tiny.b {prompt}"}


def test_windows_give_speedup_intervals_and_crossover_bounds() -> None:
    analysis = apply(sweep(rel_ci=0.05))  # every mean known to +-5% from 5 windows, no window times: unpaired
    # log of a ratio of two means each +-5%: relative errors in quadrature, Welch's df = 8 here
    a = math.sqrt(2) * 0.05 / stats.t.ppf(0.975, 4) * stats.t.ppf(0.975, 8)
    m = analysis.speedups[5]
    assert (m["speedup_lo"], m["speedup_hi"]) == pytest.approx((2.0 * math.exp(-a), 2.0 * math.exp(a)))
    assert m["speedup_ci95"] == pytest.approx(2.0 * math.sinh(a)) and m["windows_paired"] == 0
    assert m["speedup_unpaired"] == m["speedup"]
    out = analysis.crossovers
    lo, mid, hi = out["crossover_batch.tiny_lo"], out["crossover_batch.tiny"], out["crossover_batch.tiny_hi"]
    assert 4 < lo < mid < hi < 8


def test_crossover_interval_is_tight_for_tight_points_and_open_for_loose_ones() -> None:
    tight = {b: Estimate(s, 0.005, 8) for b, s in SPEEDUPS.items()}
    lo, hi = crossover_interval(tight)
    assert 2**2.5 * 0.95 < lo < 2**2.5 < hi < 2**2.5 * 1.05
    loose = {1: Estimate(1.05, 0.2, 2), 2: Estimate(1.0, 0.2, 2), 4: Estimate(0.95, 0.2, 2)}
    assert crossover_interval(loose) == (-math.inf, math.inf)  # may never pay, may always pay


def test_a_dip_that_breaks_the_curve_is_flagged() -> None:
    # the measured case: x1.35, x0.93, x1.37 at batch 1, 2, 4, each known to +-0.05
    dip = {
        1: Estimate(1.35, 0.02, 4),
        2: Estimate(0.93, 0.02, 4),
        4: Estimate(1.37, 0.02, 4),
        8: Estimate(1.1, 0.02, 4),
    }
    assert breaks_trend(dip) == [2]


def test_a_bent_but_smooth_curve_and_a_noisy_wiggle_are_not_flagged() -> None:
    assert breaks_trend({b: Estimate(s, 0.001, 4) for b, s in SPEEDUPS.items()}) == []
    wiggle = {1: Estimate(1.30, 0.05, 4), 2: Estimate(1.26, 0.05, 4), 4: Estimate(1.29, 0.05, 4)}
    assert breaks_trend(wiggle) == []


def test_verdict_states_where_it_pays_and_loses_with_intervals() -> None:
    speedups = {1: 2.0, 2: 1.5, 4: 1.13, 8: 0.98, 16: 0.49}
    rows = sweep(speedups=speedups, rel_ci=0.02)
    line, how = verdicts(rows, apply(rows))
    assert line.startswith("tiny pays up to batch 4 (×1.13 [1.1")
    assert "no measurable difference at batch 8" in line
    assert "loses from batch 16 (×0.49 [0.4" in line
    assert "; break-even between " in line and " (first crossing, 95%); " in line
    assert "inconclusive at batch 8: the widest interval is at batch 8 (×0.98 [0.9" in line
    assert "±" not in line and " CI " not in line  # the level and method are said once, on their own line
    assert how.startswith(
        "95% CI [lo, hi]: speedups arms' pooled windows (tokens over seconds), unpaired Welch t (log scale) at 5 "
        "of 5 points, each 95% alone; "
    )
    assert "hold jointly at 95% over each series' 5 points (Bonferroni: each class at 99.0% " in how
    assert "windows did not take turns" in line and line.endswith("(or measure on a quieter machine)")


def test_verdict_flags_the_unstable_point_instead_of_believing_it() -> None:
    rows = sweep(speedups={1: 1.35, 2: 0.93, 4: 1.37}, rel_ci=0.01)
    line, _ = verdicts(rows, apply(rows))
    assert "unstable at batch 2: rerun or raise measure.windows" in line
    assert line.startswith("tiny pays at batch 1, 4 (×1.35 [1.3")  # never "every measured batch"


def test_verdict_without_intervals_says_so() -> None:
    (line,) = verdicts(sweep(), apply(sweep()))
    assert "no intervals: raise measure.windows" in line and "break-even ≈ 5.7" in line


def test_repeats_pair_launch_by_launch() -> None:
    rows = []
    for repeat, drift in enumerate((1.0, 0.8, 0.9)):  # the machine slows down and recovers
        rows += [row("none", 4, 100.0 * drift, rel_ci=0.01, repeat=repeat)]
        rows += [row("tiny", 4, 150.0 * drift, rel_ci=0.01, repeat=repeat)]
    (series,) = apply(rows).series
    assert series.points[4.0].value == pytest.approx(1.5) and series.points[4.0].lo > 1.4


def test_verdict_warns_where_the_load_client_may_be_the_bottleneck() -> None:
    rows = sweep(rel_ci=0.02)
    rows[4].metrics["client_cpu"] = 0.8  # the baseline at batch 16 kept the client busy
    line, _ = verdicts(rows, apply(rows))
    assert "the load client used 80% of a core at batch 16: it may be the bottleneck there" in line


def test_a_point_a_cap_stopped_early_is_named_and_left_out_of_the_break_even() -> None:
    rows = sweep(rel_ci=0.02)
    rows[7].metrics["windows_settled"] = 0.0  # tiny at batch 4: measure.max_s stopped it early
    analysis = apply(rows)
    line, _ = verdicts(rows, analysis)
    assert "unsettled at batch 4 (a cap stopped it before measure.windows windows): raise measure.max_s" in line
    assert analysis.series[0].unsettled == [4.0]
    assert 2 < analysis.crossovers["crossover_batch.tiny"] < 8  # from batch 2 (x1.5) and 8 (x0.8) alone


def windowed(drafter: str, batch: int, tputs: list[float], starts: list[float]) -> PointResult:
    """A point measured in windows of 1 s starting at ``starts``, with its aggregate as a point records it."""
    r = row(drafter, batch, 0.0)
    r.windows = [
        {
            "output_throughput": t,
            "window_s": 1.0,
            "decode_speed": t / 10,
            "decode_tokens": t / 10,
            "decode_s": 1.0,
            "window_start": s,
            "window_end": s + 1.0,
        }
        for t, s in zip(tputs, starts, strict=True)
    ]
    r.metrics |= aggregate(r.windows, MeasureConfig(windows=len(tputs)))
    return r


# the machine drifts 2x between windows; each speculative window is 1.3x its partner
DRIFT = [100.0, 200.0, 150.0, 120.0]
RATIO = [1.28, 1.31, 1.30, 1.32]


def test_windows_that_took_turns_are_paired_and_the_unpaired_figure_kept_beside() -> None:
    spec = [b * r for b, r in zip(DRIFT, RATIO, strict=True)]
    rows = [windowed("none", 4, DRIFT, [0.0, 2.0, 4.0, 6.0]), windowed("tiny", 4, spec, [1.0, 3.0, 5.0, 7.0])]
    analysis = apply(rows)
    m = rows[1].metrics
    assert rows[1].tags["specexp.speedup_method"] == "paired" and m["windows_paired"] == 4
    value = sum(spec) / sum(DRIFT)  # the arms' tokens over their seconds (1 s windows)
    residuals = np.array(spec) / np.mean(spec) - np.array(DRIFT) / np.mean(DRIFT)  # partners' relative residuals
    half = stats.t.ppf(0.975, 3) * residuals.std(ddof=1) / 2
    assert m["speedup"] == pytest.approx(value) and m["speedup_unpaired"] == m["speedup"]
    assert (m["speedup_lo"], m["speedup_hi"]) == pytest.approx((value * math.exp(-half), value * math.exp(half)))
    assert m["speedup_unpaired_lo"] < 1 < m["speedup_unpaired_hi"]  # the drift swamps the unpaired ratio
    assert m["speedup_ci95"] < m["speedup_unpaired_ci95"] / 10
    line, how = verdicts(rows, analysis)
    assert line.startswith("tiny pays at batch 4 (×1.30 [1.2")
    assert how.startswith(
        "95% CI [lo, hi]: speedups arms' pooled windows (tokens over seconds), paired t over 4 window pairs "
        "(log scale), each 95% alone; "
    )


def test_windows_one_arm_after_the_other_are_not_paired() -> None:
    spec = [b * r for b, r in zip(DRIFT, RATIO, strict=True)]
    sequential = [windowed("none", 4, DRIFT, [0.0, 1.0, 2.0, 3.0]), windowed("tiny", 4, spec, [4.0, 5.0, 6.0, 7.0])]
    apply(sequential)
    assert sequential[1].tags["specexp.speedup_method"] == "unpaired" and sequential[1].metrics["windows_paired"] == 0
    assert sequential[1].metrics["speedup"] == sequential[1].metrics["speedup_unpaired"]
    overlapping = [windowed("none", 4, DRIFT, [0.0, 2.0, 4.0, 6.0]), windowed("tiny", 4, spec, [0.5, 2.5, 4.5, 6.5])]
    apply(overlapping)  # measured at the same time (side by side), not in turn
    assert overlapping[1].tags["specexp.speedup_method"] == "unpaired"


def test_pairs_stop_where_the_turns_stop() -> None:
    base = [{"window_start": s, "window_end": s + 1.0} for s in (0.0, 2.0, 4.0)]
    # a precision target let one arm go on alone after its partner stopped
    spec = [{"window_start": s, "window_end": s + 1.0} for s in (1.0, 3.0, 5.0, 6.5, 8.0)]
    assert alternated(spec, base) == 3
    assert alternated(spec, [*base[:1], {"window_start": 9.0, "window_end": 10.0}]) == 1
    assert alternated(spec, [{"output_throughput": 1.0}] * 3) == 0  # recorded before windows had times


def test_a_row_read_back_without_windows_keeps_its_paired_interval() -> None:
    spec = [b * r for b, r in zip(DRIFT, RATIO, strict=True)]
    rows = [windowed("none", 4, DRIFT, [0.0, 2.0, 4.0, 6.0]), windowed("tiny", 4, spec, [1.0, 3.0, 5.0, 7.0])]
    measured = dict(apply(rows).speedups[1])
    for r in rows:  # as MLflow gives them back: metrics (and the method tag), no windows
        r.windows = []
    again = apply(rows).speedups[1]
    assert again["windows_paired"] == 4 and rows[1].tags["specexp.speedup_method"] == "paired"
    for key in ("speedup", "speedup_lo", "speedup_hi", "speedup_unpaired"):
        assert again[key] == pytest.approx(measured[key])


def test_an_inconclusive_verdict_names_the_load_it_saw() -> None:
    rows = sweep(speedups={1: 1.02, 4: 0.99}, rel_ci=0.05)
    for r in rows:
        r.metrics["host_load1"] = 5.0
        r.tags["specexp.host_cpus"] = "2"
    rows[3].metrics["client_cpu"] = 0.7  # tiny at batch 4
    line, _ = verdicts(rows, apply(rows))
    assert line.startswith("tiny: no measurable difference at batch 1, 4")
    assert "inconclusive at batch 1, 4: the widest interval is at batch" in line
    assert "the host was loaded (load average 2.5 per core at batch 1)" in line
    assert "the load client used 70% of a core at batch 4" in line and "repeats=3" in line
