"""Stream decode speed is a ratio of sums (tokens after the first chunk over first-to-last-chunk time),
per window and per point, never a mean of per-request rates (issue 33, item 2)."""

import numpy as np
import pytest

from specexp.config import MeasureConfig
from specexp.metrics import requests
from specexp.metrics.stats import ratio_of_sums
from specexp.metrics.window_results import aggregate
from specexp.records import Chunk, RequestRecord


def steady(i: int, start: float, tokens: int = 40, speed: float = 25.0) -> RequestRecord:
    """A request whose first chunk comes 0.2 s after its send and then one token every 1 / speed s."""
    first = start + 0.2
    chunks = [Chunk(first, 1)] + [Chunk(first + k / speed, 1) for k in range(1, tokens + 1)]
    return RequestRecord(i, send=start, end=chunks[-1].t, prompt_tokens=10, chunks=chunks)


def burst(i: int, start: float) -> RequestRecord:
    """The record that read 30,807 tok/s: its last chunks arrived 130 µs after its first."""
    first = start + 0.2
    chunks = [Chunk(first, 1), Chunk(first + 6e-5, 2), Chunk(first + 1.3e-4, 2)]
    return RequestRecord(i, send=start, end=chunks[-1].t, prompt_tokens=10, chunks=chunks)


def single_chunk(i: int, start: float) -> RequestRecord:
    return RequestRecord(i, send=start, end=start + 0.3, prompt_tokens=10, chunks=[Chunk(start + 0.3, 6)])


def window(start: float, with_burst: bool) -> list[RequestRecord]:
    out = [steady(i, start + 0.01 * i) for i in range(7)]
    return [*out, burst(7, start) if with_burst else steady(7, start + 0.07), single_chunk(8, start)]


def test_a_request_microseconds_long_does_not_rule_the_window() -> None:
    m = requests.compute(window(0.0, with_burst=True))
    assert 30_000 < 4 / 1.3e-4 < 31_000  # the burst's own rate
    tokens, seconds = 7 * 40 + 4, 7 * 40 / 25.0 + 1.3e-4
    assert m["decode_speed"] == pytest.approx(tokens / seconds)  # ≈ 25.4 tok/s, where a mean read ≈ 3,870
    assert m["decode_tokens"] == tokens and m["decode_s"] == pytest.approx(seconds)
    assert m["decode_excluded"] == 1  # the single-chunk request has no decode rate, and is counted
    assert m["decode_speed_p50"] == pytest.approx(25.0)  # a percentile stays per request


def test_a_point_pools_its_windows_and_its_interval_stays_near_the_streams() -> None:
    windows = [requests.compute(window(10.0 * k, with_burst=k == 3)) for k in range(8)]
    out = aggregate(windows, MeasureConfig(windows=8))
    pooled = sum(w["decode_tokens"] for w in windows) / sum(w["decode_s"] for w in windows)
    assert out["decode_speed"] == pytest.approx(pooled)
    assert abs(out["decode_speed"] / 25.0 - 1) < 0.10
    assert 0 < out["decode_speed_lo"] <= out["decode_speed"] <= out["decode_speed_hi"] < 1.1 * 25.0
    assert out["decode_excluded"] == 8


def test_the_ratio_estimators_interval_covers_the_true_rate() -> None:
    """Windows of a known rate (4 tok/s per second of decode, noise on the tokens): the 95% interval of
    Σ tokens / Σ seconds holds the truth in about 95% of 2,000 simulated points of 8 windows."""
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(2000):
        seconds = rng.uniform(5.0, 15.0, 8)
        tokens = 4.0 * seconds + rng.normal(0.0, 2.0, 8) * np.sqrt(seconds)
        est = ratio_of_sums(tokens, seconds)
        hits += est.lo <= 4.0 <= est.hi
    assert 0.93 <= hits / 2000 <= 0.97
