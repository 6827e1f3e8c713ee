"""Windows of one point on synthetic throughputs with known answers: warm-up, stopping, the result."""

import pytest

from specexp.config import MeasureConfig
from specexp.metrics.windows import aggregate, enough, more_windows, warmup_windows

NOISE = [100.0, 103.0, 98.0, 101.0, 99.0, 102.0]


def test_a_warming_trend_is_discarded_and_steady_windows_kept() -> None:
    # 50 -> 95 still climbing, then flat around 100: the four climbing windows are warm-up
    assert warmup_windows([50.0, 70.0, 85.0, 95.0, 100.0, 99.0, 101.0, 100.0]) == 4


def test_noise_without_a_trend_is_never_discarded() -> None:
    assert warmup_windows(NOISE) == 0
    assert warmup_windows([100.0, 90.0]) == 0  # two windows cannot tell warm-up from noise


def test_at_least_two_windows_stay_however_steep_the_trend() -> None:
    assert warmup_windows([10.0, 20.0, 40.0, 80.0]) <= 2


def test_fixed_windows_stop_after_enough_steady_ones() -> None:
    measure = MeasureConfig(windows=3)
    assert more_windows([100.0, 101.0], measure, elapsed_s=1.0)
    assert not more_windows([100.0, 101.0, 99.0], measure, elapsed_s=1.0)
    # a warm-up window does not count: after discarding it, one more is needed
    warming = [40.0, 100.0, 101.0, 99.0]
    assert warmup_windows(warming) == 1 and not enough(warming[:3], measure)


def test_a_precision_target_measures_until_the_interval_is_that_tight() -> None:
    measure = MeasureConfig(windows=3, rel_ci=0.03, max_windows=20)
    wide = [100.0, 112.0, 90.0]
    assert more_windows(wide, measure, elapsed_s=1.0)
    assert not more_windows([100.0, 101.0, 99.0, 100.5], measure, elapsed_s=1.0)


def test_caps_stop_a_point_that_never_settles() -> None:
    measure = MeasureConfig(windows=3, rel_ci=0.001, max_windows=5, max_s=60.0)
    assert not more_windows(NOISE[:5], measure, elapsed_s=1.0)  # max_windows
    assert not more_windows(NOISE[:3], measure, elapsed_s=61.0)  # max_s
    # five steady windows, only less precise than asked: settled, with a wider interval
    assert aggregate([{"output_throughput": v} for v in NOISE[:5]], measure)["windows_settled"] == 1.0
    # max_s stopped it after two windows: not enough steady ones to trust
    assert aggregate([{"output_throughput": v} for v in NOISE[:2]], measure)["windows_settled"] == 0.0


def test_aggregate_means_intervals_and_counts_over_steady_windows() -> None:
    windows = [
        {"output_throughput": 40.0, "requests_ok": 8, "ttft_ms_p50": 90.0},
        {"output_throughput": 100.0, "requests_ok": 8, "ttft_ms_p50": 10.0},
        {"output_throughput": 102.0, "requests_ok": 8, "ttft_ms_p50": 12.0},
        {"output_throughput": 98.0, "requests_ok": 7, "ttft_ms_p50": 11.0},
        {"output_throughput": 100.0, "requests_ok": 8, "ttft_ms_p50": 11.0},
    ]
    out = aggregate(windows, MeasureConfig(windows=3))
    assert out["windows"] == 4 and out["windows_warmup"] == 1 and out["windows_settled"] == 1.0
    assert out["requests_ok"] == 31  # counts add up over the kept windows only
    assert out["output_throughput"] == pytest.approx(100.0)
    # sd of (100, 102, 98, 100) = 1.633; t(3) = 3.182; half-width = 3.182 * 1.633 / 2
    assert out["output_throughput_ci95"] == pytest.approx(3.182 * 1.63299 / 2, rel=1e-4)
    assert out["ttft_ms_p50"] == pytest.approx(11.0) and "ttft_ms_p50_ci95" in out


def test_one_window_gives_no_interval() -> None:
    out = aggregate([{"output_throughput": 100.0}], MeasureConfig(windows=1))
    assert out["windows"] == 1 and "output_throughput_ci95" not in out
