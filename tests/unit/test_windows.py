"""Windows of one point on synthetic throughputs with known answers: warm-up, stopping, the result."""

import math

import numpy as np
import pytest
from scipy import stats

from specexp.config import ConfigError, MeasureConfig
from specexp.metrics.methods import key_method
from specexp.metrics.window_results import aggregate, more_windows

NOISE = [100.0, 103.0, 98.0, 101.0, 99.0, 102.0]


def test_no_measured_window_is_dropped_for_looking_unlike_the_others() -> None:
    # a slow first window (what the old rule discarded after the fact) stays in, and so does its
    # spread: the warm-up is the phase before the first measured window (measure.warmup_windows)
    values = [40.0, 100.0, 102.0, 98.0]
    out = aggregate([{"output_throughput": v} for v in values], MeasureConfig(windows=3))
    assert out["windows"] == 4 and out["windows_warmup"] == 0
    assert out["output_throughput"] == pytest.approx(85.0)
    log_half = stats.t.ppf(0.975, 3) * np.std(values, ddof=1) / 2 / 85.0  # a rate: on the log scale
    assert (out["output_throughput_lo"], out["output_throughput_hi"]) == pytest.approx(
        (85.0 * math.exp(-log_half), 85.0 * math.exp(log_half))
    )


def test_the_warm_up_phase_is_stated_and_validated() -> None:
    assert MeasureConfig().warmup_windows == 2  # two whole (short) windows at the point's load, discarded
    assert MeasureConfig(warmup_windows=0).warmup_windows == 0
    with pytest.raises(ConfigError, match=r"measure\.warmup_windows"):
        MeasureConfig(warmup_windows=-1)


def test_fixed_windows_stop_after_enough_steady_ones() -> None:
    measure = MeasureConfig(windows=3)
    assert more_windows([100.0, 101.0], measure, elapsed_s=1.0)
    assert not more_windows([100.0, 101.0, 99.0], measure, elapsed_s=1.0)
    assert not more_windows([40.0, 100.0, 101.0], measure, elapsed_s=1.0)  # however unlike, every window counts


def test_a_precision_target_measures_until_the_interval_is_that_tight_at_a_look() -> None:
    measure = MeasureConfig(windows=3, rel_ci=0.03, max_windows=20)  # looks at 3, 5, 8, 12, 18, 20 windows
    wide = [100.0, 112.0, 90.0]
    assert more_windows(wide, measure, elapsed_s=1.0)
    assert more_windows([100.0, 100.2, 99.9, 100.1], measure, elapsed_s=1.0)  # precise, but no look at 4
    assert not more_windows([100.0, 100.2, 99.9, 100.1, 100.0], measure, elapsed_s=1.0)


def test_caps_stop_a_point_that_never_settles() -> None:
    measure = MeasureConfig(windows=3, rel_ci=0.001, max_windows=5, max_s=60.0)
    assert not more_windows(NOISE[:5], measure, elapsed_s=1.0)  # max_windows
    assert not more_windows(NOISE[:3], measure, elapsed_s=61.0)  # max_s
    # five steady windows, only less precise than asked: settled, with a wider interval
    assert aggregate([{"output_throughput": v} for v in NOISE[:5]], measure)["windows_settled"] == 1.0
    # max_s stopped it after two windows: not enough steady ones to trust
    assert aggregate([{"output_throughput": v} for v in NOISE[:2]], measure)["windows_settled"] == 0.0


def test_aggregate_means_intervals_and_counts_over_windows() -> None:
    windows = [
        {"output_throughput": 100.0, "requests_ok": 8, "ttft_ms_p50": 10.0, "window_start": 1.0, "window_end": 2.0},
        {"output_throughput": 102.0, "requests_ok": 8, "ttft_ms_p50": 12.0, "window_start": 3.0, "window_end": 4.0},
        {"output_throughput": 98.0, "requests_ok": 7, "ttft_ms_p50": 11.0, "window_start": 5.0, "window_end": 6.0},
        {"output_throughput": 100.0, "requests_ok": 8, "ttft_ms_p50": 11.0, "window_start": 7.0, "window_end": 8.0},
    ]
    out = aggregate(windows, MeasureConfig(windows=3))
    assert out["windows"] == 4 and out["windows_warmup"] == 0 and out["windows_settled"] == 1.0
    assert out["requests_ok"] == 31
    assert out["output_throughput"] == pytest.approx(100.0)
    # sd of (100, 102, 98, 100) = 1.633; t(0.975, 3) = 3.1824; on the log scale: ± 3.1824 * 1.633 / 2 / 100
    assert out["output_throughput_ci95"] == pytest.approx(100 * math.sinh(3.18245 * 1.63299 / 200), rel=1e-4)
    assert out["ttft_ms_p50"] == pytest.approx(11.0) and "ttft_ms_p50_ci95" in out
    assert "window_start" not in out and "window_end" not in out  # each window's span, not a metric


def test_attainment_is_a_binomial_interval_over_requests_and_goodput_stays_positive() -> None:
    windows = [
        {"slo_met": 8.0, "requests_ok": 8, "requests_failed": 0, "slo_attainment": 1.0, "goodput": 9.0},
        {"slo_met": 1.0, "requests_ok": 7, "requests_failed": 1, "slo_attainment": 0.125, "goodput": 0.5},
        {"slo_met": 7.0, "requests_ok": 8, "requests_failed": 0, "slo_attainment": 0.875, "goodput": 5.5},
    ]
    out = aggregate(windows, MeasureConfig(windows=3))
    exact = stats.binomtest(16, 24).proportion_ci(0.95, method="exact")
    assert out["slo_attainment"] == pytest.approx(16 / 24)
    assert (out["slo_attainment_lo"], out["slo_attainment_hi"]) == pytest.approx((exact.low, exact.high))
    assert 0.0 <= out["slo_attainment_lo"] < out["slo_attainment"] < out["slo_attainment_hi"] <= 1.0
    # a symmetric interval would read 5.0 ± 10.7, below 0; on the log scale it stays above it
    assert out["goodput"] == pytest.approx(5.0) and 0.0 < out["goodput_lo"] < 5.0 < out["goodput_hi"]


def test_one_window_gives_no_interval() -> None:
    out = aggregate([{"output_throughput": 100.0}], MeasureConfig(windows=1))
    assert out["windows"] == 1 and "output_throughput_ci95" not in out


def test_the_pooled_throughput_weighs_each_window_by_its_length() -> None:
    """Two windows of 100 and 300 tok/s, the second three times as long: their mean rate is 200, the
    point's rate (Σ tokens / Σ seconds) 250."""
    windows = [
        {"output_throughput": 100.0, "window_s": 1.0, "window_output_tokens": 100.0},
        {"output_throughput": 300.0, "window_s": 3.0, "window_output_tokens": 900.0},
    ]
    out = aggregate(windows, MeasureConfig(windows=2))
    assert out["output_throughput"] == pytest.approx(200.0)
    assert out["output_throughput_pooled"] == pytest.approx(250.0)
    assert out["window_s"] == 4.0 and out["window_output_tokens"] == 1000.0


def test_no_interval_leaves_its_quantitys_range() -> None:
    """Three windows whose Student-t intervals once read TTFT [-1, 21] ms and an acceptance rate above 1:
    a positive quantity's interval is made on the log scale, a fraction's on the logit scale, and the
    methods line says so."""
    windows = [
        {"ttft_ms_mean": 2.0, "accept_rate": 0.99, "accept_length": 1.2, "output_throughput": 5.0},
        {"ttft_ms_mean": 18.0, "accept_rate": 0.75, "accept_length": 3.9, "output_throughput": 90.0},
        {"ttft_ms_mean": 10.0, "accept_rate": 0.97, "accept_length": 2.0, "output_throughput": 40.0},
    ]
    out = aggregate(windows, MeasureConfig(windows=3))
    linear = stats.t.interval(0.95, 2, loc=10.0, scale=np.std([2.0, 18.0, 10.0], ddof=1) / math.sqrt(3))
    assert linear[0] < 0  # what a t interval on the plain scale said
    for key in ("ttft_ms_mean", "accept_length", "output_throughput"):
        assert 0 < out[f"{key}_lo"] < out[key] < out[f"{key}_hi"]
    rates = [0.99, 0.75, 0.97]
    assert stats.t.interval(0.95, 2, loc=np.mean(rates), scale=np.std(rates, ddof=1) / math.sqrt(3))[1] > 1
    assert 0 < out["accept_rate_lo"] < out["accept_rate"] < out["accept_rate_hi"] < 1
    rows = [{**out, "windows": 3}]
    assert key_method("ttft_ms_mean", rows) == "Student-t over 3 windows (log scale)"
    assert key_method("accept_rate", rows) == "Student-t over 3 windows (logit scale)"
