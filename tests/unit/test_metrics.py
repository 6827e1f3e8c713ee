"""METRICS.md definitions on hand-computed records, multi-token chunks included."""

import pytest

from specexp.metrics import requests
from specexp.records import Chunk, RequestRecord


def records() -> list[RequestRecord]:
    r0 = RequestRecord(0, send=0.0, end=0.4, prompt_tokens=10, chunks=[Chunk(0.1, 1), Chunk(0.3, 3), Chunk(0.4, 1)])
    r1 = RequestRecord(1, send=0.05, end=0.45, prompt_tokens=10, chunks=[Chunk(0.25, 1), Chunk(0.45, 1)])
    r2 = RequestRecord(2, send=0.1, end=0.5, error="HTTP 500")
    return [r0, r1, r2]


def test_counts_and_throughput() -> None:
    m = requests.compute(records())
    assert m["requests_ok"] == 2 and m["requests_failed"] == 1
    assert m["output_tokens"] == 7 and m["input_tokens"] == 20
    # window: first send 0.0 to the last end 0.5
    assert m["output_throughput"] == pytest.approx(14.0)
    assert m["request_throughput"] == pytest.approx(4.0)
    assert m["total_throughput"] == pytest.approx(54.0)


def test_latencies() -> None:
    m = requests.compute(records())
    assert m["ttft_ms_mean"] == pytest.approx(150.0)
    assert m["e2e_ms_mean"] == pytest.approx(400.0)
    assert m["tpot_ms_mean"] == pytest.approx((75.0 + 200.0) / 2)
    # decode: 4 tokens after the first chunk in 0.3 s, and 1 in 0.2 s; pooled, and the per-request median
    assert m["decode_tokens"] == 5 and m["decode_s"] == pytest.approx(0.5) and m["decode_excluded"] == 0
    assert m["decode_speed"] == pytest.approx(5 / 0.5)
    assert m["decode_speed_p50"] == pytest.approx((4 / 0.3 + 5.0) / 2)


def test_itl_is_token_normalised_and_chunk_gap_is_raw() -> None:
    m = requests.compute(records())
    # a 3-token chunk after 200 ms gives three samples of 66.7 ms
    assert m["itl_ms_mean"] == pytest.approx((3 * 200 / 3 + 100 + 200) / 5)
    assert m["chunk_gap_ms_mean"] == pytest.approx((200 + 100 + 200) / 3)
    assert m["chunk_gap_ms_p50"] == pytest.approx(200.0)
    assert m["tokens_per_chunk_mean"] == pytest.approx(7 / 5)


def test_percentiles_interpolate() -> None:
    out = requests.summarize("x", [1.0, 2.0, 3.0, 4.0])
    assert out == {"x_mean": 2.5, "x_p50": 2.5, "x_p90": pytest.approx(3.7), "x_p99": pytest.approx(3.97)}


def test_usage_count_wins_over_chunks() -> None:
    r = RequestRecord(0, send=0.0, end=1.0, completion_tokens=9, chunks=[Chunk(0.5, 1), Chunk(1.0, 1)])
    assert r.output_tokens == 9


def test_all_failed_has_no_rates() -> None:
    m = requests.compute([RequestRecord(0, send=0.0, end=1.0, error="boom")])
    assert m["requests_ok"] == 0 and "output_throughput" in m and m["output_throughput"] == 0.0
    assert "ttft_ms_mean" not in m


def with_fillers() -> list[RequestRecord]:
    """Two measured requests (window 0.0 → 0.5) and two fillers keeping the load up: one that ended
    within the window, one cut after it with a token past the window's end."""
    measured = [
        RequestRecord(0, send=0.0, end=0.5, prompt_tokens=4, chunks=[Chunk(0.2, 1), Chunk(0.5, 1)]),
        RequestRecord(1, send=0.0, end=0.3, prompt_tokens=4, chunks=[Chunk(0.1, 1), Chunk(0.3, 1)]),
    ]
    done = RequestRecord(2, send=0.3, end=0.45, prompt_tokens=4, filler=True, chunks=[Chunk(0.4, 1), Chunk(0.45, 2)])
    done.finish_reason = "length"
    cut = RequestRecord(3, send=0.45, end=0.6, prompt_tokens=4, filler=True, error="cut", chunks=[Chunk(0.48, 1)])
    cut.chunks.append(Chunk(0.55, 5))  # after the window's end: not served within it
    return [*measured, done, cut]


def test_fillers_count_in_throughput_within_the_window_only() -> None:
    m = requests.compute(with_fillers())
    assert m["window_s"] == pytest.approx(0.5)
    assert m["window_output_tokens"] == 4 + 3 + 1  # measured, the done filler, the cut one's first token
    assert m["output_throughput"] == pytest.approx(8 / 0.5)
    assert m["request_throughput"] == pytest.approx(3 / 0.5)  # the measured two and the filler that ended
    assert m["total_throughput"] == pytest.approx((8 + 4 * 4) / 0.5)


def test_fillers_never_count_in_latencies_or_counts() -> None:
    m = requests.compute(with_fillers())
    assert m["requests_ok"] == 2 and m["requests_failed"] == 0 and m["output_tokens"] == 4
    assert m["ttft_ms_mean"] == pytest.approx(150.0)
    assert m["e2e_ms_mean"] == pytest.approx(400.0)


def test_the_pooled_throughput_weighs_windows_by_their_length() -> None:
    windows = [{"window_s": 1.0, "window_output_tokens": 100.0}, {"window_s": 3.0, "window_output_tokens": 100.0}]
    assert requests.pooled_throughput(windows) == {"output_throughput_pooled": 50.0}  # the mean of rates: 66.7
    assert requests.pooled_throughput([{}]) == {}
