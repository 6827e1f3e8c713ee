"""Sweep-level analysis on hand-made rows with a known crossover."""

import pytest

from specexp.report.analysis import crossover, crossovers, pair_speedups
from specexp.result import PointResult


def row(drafter: str, batch: int, tput: float, engine: str = "torch", decode: float = 10.0) -> PointResult:
    return PointResult.from_params(
        "ok",
        {
            "engine.name": engine,
            "drafter.name": drafter,
            "drafter.num_steps": 0 if drafter == "none" else 4,
            "batch": batch,
            "sweep_id": "s",
            "max_batch": 16,
        },
        metrics={"output_throughput": tput, "decode_speed_mean": decode},
    )


SPEEDUPS = {1: 2.0, 2: 1.5, 4: 1.2, 8: 0.8, 16: 0.5}


def sweep(engine: str = "torch") -> list[PointResult]:
    rows = [row("none", b, 100.0 * b, engine) for b in SPEEDUPS]
    rows += [row("tiny", b, 100.0 * b * s, engine, decode=20.0) for b, s in SPEEDUPS.items()]
    return rows


def test_pairs_each_speculative_point_with_its_baseline() -> None:
    rows = sweep()
    speedups = pair_speedups(rows)
    assert sorted(speedups) == [5, 6, 7, 8, 9]
    assert [speedups[i]["speedup"] for i in range(5, 10)] == pytest.approx(list(SPEEDUPS.values()))
    assert speedups[5]["decode_speedup"] == pytest.approx(2.0)


def test_crossover_interpolates_in_log2_batch() -> None:
    # wins at 4 (1.2), loses at 8 (0.8): halfway in log2 between 4 and 8
    assert crossover(list(SPEEDUPS.items())) == pytest.approx(2**2.5)
    rows = sweep()
    assert crossovers(rows, pair_speedups(rows)) == {"crossover_batch.tiny": pytest.approx(2**2.5)}


def test_no_crossover_when_always_or_never_winning() -> None:
    assert crossover([(1, 1.5), (4, 1.1)]) is None
    assert crossover([(1, 0.9), (4, 0.5)]) is None


def test_failed_baseline_gives_no_speedup() -> None:
    rows = sweep()
    rows[0].status = "failed"
    assert 5 not in pair_speedups(rows)


def test_two_engines_get_a_crossover_each() -> None:
    rows = sweep("torch") + sweep("vllm")
    out = crossovers(rows, pair_speedups(rows))
    assert set(out) == {"crossover_batch.tiny.torch", "crossover_batch.tiny.vllm"}


def test_repeats_give_speedup_intervals_and_crossover_bounds() -> None:
    rows = sweep()
    for r in rows:  # every mean known to +-5%
        r.metrics["output_throughput_ci95"] = 0.05 * r.metrics["output_throughput"]
    speedups = pair_speedups(rows)
    # ratio of two means each +-5%: +-5% * sqrt(2) of the ratio, to first order
    assert speedups[5]["speedup_ci95"] == pytest.approx(2.0 * 0.05 * 2**0.5)
    out = crossovers(rows, speedups)
    lo, mid, hi = out["crossover_batch.tiny_lo"], out["crossover_batch.tiny"], out["crossover_batch.tiny_hi"]
    assert lo < mid < hi
    # lower bound: speedups minus their half-widths, 4 -> 1.2 - 0.0849, 8 -> 0.8 - 0.0566
    s4, s8 = 1.2 * (1 - 0.05 * 2**0.5), 0.8 * (1 - 0.05 * 2**0.5)
    assert lo == pytest.approx(2 ** (2 + (s4 - 1) / (s4 - s8)))


def test_verdict_says_where_speculation_stops_paying_off() -> None:
    from specexp.report.verdict import verdicts

    rows = sweep()
    speedups = pair_speedups(rows)
    assert verdicts(rows, speedups, crossovers(rows, speedups)) == [
        "with tiny, speculation stops paying off above batch ≈ 5.7"
    ]
