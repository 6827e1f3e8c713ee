"""Goodput, SLO attainment and the load carried, from hand-made records with known outcomes."""

from __future__ import annotations

import pytest

from specexp.config import SloConfig
from specexp.metrics import slo, traffic
from specexp.records import Chunk, RequestRecord


def record(
    index: int,
    arrival: float | None,
    send: float,
    ttft: float,
    tpot: float,
    tokens: int = 5,
    error: str | None = None,
) -> RequestRecord:
    """A request sent at ``send`` whose first token comes ``ttft`` s later and the rest ``tpot`` s apart."""
    chunks = [] if error else [Chunk(send + ttft + i * tpot, 1) for i in range(tokens)]
    end = chunks[-1].t if chunks else send + ttft
    return RequestRecord(index=index, send=send, arrival=arrival, end=end, chunks=chunks, error=error)


# TTFT is counted from the arrival: request 2 waited 0.3 s in the client before its 0.05 s TTFT.
RECORDS = [
    record(0, 0.0, 0.0, ttft=0.05, tpot=0.010),  # meets both
    record(1, 1.0, 1.0, ttft=0.05, tpot=0.030),  # TPOT 30 ms > 20 ms
    record(2, 2.0, 2.3, ttft=0.05, tpot=0.010),  # TTFT 350 ms from arrival > 100 ms
    record(3, 3.0, 3.0, ttft=0.08, tpot=0.015),  # meets both
    record(4, 4.0, 4.0, ttft=0.05, tpot=0.0, error="HTTP 500"),  # failed: meets nothing
]


def test_goodput_and_attainment_count_requests_meeting_every_target() -> None:
    out = slo.compute(RECORDS, SloConfig(ttft_ms=100, tpot_ms=20))
    assert out["slo_attainment"] == pytest.approx(2 / 5)
    assert out["goodput"] == pytest.approx(2 / 4.05)  # first send (0 s) to the last end (the failure, 4.05 s)


@pytest.mark.parametrize(
    ("targets", "good"),
    [
        ({"ttft_ms": 100}, [0, 1, 3]),  # TPOT not checked
        ({"tpot_ms": 20}, [0, 2, 3]),  # TTFT not checked
        ({"ttft_ms": 60, "tpot_ms": 20}, [0]),  # 80 ms TTFT misses
        ({"ttft_ms": 400, "tpot_ms": 40}, [0, 1, 2, 3]),
    ],
)
def test_each_target_is_optional(targets: dict[str, float], good: list[int]) -> None:
    cfg = SloConfig(**targets)
    assert [r.index for r in RECORDS if slo.meets(r, cfg)] == good
    assert slo.compute(RECORDS, cfg)["slo_attainment"] == pytest.approx(len(good) / 5)


def test_no_target_no_goodput() -> None:
    assert slo.compute(RECORDS, SloConfig()) == {}


def test_a_single_token_has_no_tpot_and_a_closed_loop_request_arrives_when_sent() -> None:
    one = record(0, None, 10.0, ttft=0.05, tpot=0.0, tokens=1)
    assert slo.meets(one, SloConfig(ttft_ms=60, tpot_ms=1))
    assert not slo.meets(one, SloConfig(ttft_ms=40))


def test_offered_achieved_concurrency_and_queue() -> None:
    # four arrivals 1 s apart; each takes 0.5 s except that a cap held request 2 for 0.3 s
    recs = [record(i, float(i), float(i) + (0.3 if i == 2 else 0.0), ttft=0.1, tpot=0.1) for i in range(4)]
    out = traffic.compute(recs)
    assert out["offered_rate"] == pytest.approx(1.0)
    ends = [r.end for r in recs]
    # the 3 s arrival span, shifted to start at the first end: requests 1, 2 and 3 end within it
    assert out["achieved_rate"] == pytest.approx(3 / 3.0)
    assert out["queue_ms_p50"] == pytest.approx(0.0) and out["queue_ms_mean"] == pytest.approx(300 / 4)
    assert out["concurrency_max"] == 1.0  # never two at once
    assert out["concurrency_mean"] == pytest.approx(4 * 0.5 / (ends[-1] - 0.0))


def test_a_saturated_point_achieves_less_than_it_was_offered() -> None:
    # forty arrivals 0.1 s apart, served one at a time in 0.5 s each: completions 0.5 s apart
    recs = []
    for i in range(40):
        send = max(i * 0.1, 0.5 * i)
        recs.append(record(i, i * 0.1, send, ttft=0.1, tpot=0.1))
    out = traffic.compute(recs)
    assert out["offered_rate"] == pytest.approx(10.0)
    # within the 3.9 s after the first end (0.5 s): the ends at 1.0, 1.5, ... 4.0
    assert out["achieved_rate"] == pytest.approx(7 / 3.9)
    assert out["queue_ms_p99"] > 3000


def test_achieved_never_exceeds_offered_when_a_burst_drains() -> None:
    # a burst: arrivals at 0, 0.01, 0.02, then 1.0; the first three are slow, the last one fast, so the
    # ends come closer together than the arrivals (the old estimator read twice the offered rate)
    recs = [
        record(i, a, a, ttft=t, tpot=0.0, tokens=1)
        for i, (a, t) in enumerate([(0, 0.9), (0.01, 0.9), (0.02, 0.9), (1.0, 0.01)])
    ]
    out = traffic.compute(recs)
    assert out["offered_rate"] == pytest.approx(3 / 1.0)
    assert out["achieved_rate"] <= out["offered_rate"]


def test_overlap_counts_requests_in_flight_at_once() -> None:
    recs = [record(i, None, 0.1 * i, ttft=0.1, tpot=0.1) for i in range(3)]  # each 0.5 s long: all overlap
    out = traffic.compute(recs)
    assert out["concurrency_max"] == 3.0
    assert "offered_rate" not in out and "queue_ms_mean" not in out  # a closed loop offers no schedule


def test_concurrency_counts_fillers_and_clips_to_the_window() -> None:
    # two streams: measured 0 → 1 and 0 → 0.5, then a filler 0.5 → 2 on the stream that finished first
    recs = [record(0, None, 0.0, ttft=0.1, tpot=0.225), record(1, None, 0.0, ttft=0.1, tpot=0.1)]
    filler = record(2, None, 0.5, ttft=0.1, tpot=0.35)
    filler.filler = True
    out = traffic.compute([*recs, filler])
    assert recs[0].end == pytest.approx(1.0) and recs[1].end == pytest.approx(0.5)
    assert out["concurrency_mean"] == pytest.approx(2.0)  # the filler counts up to the window's end only
    assert out["concurrency_max"] == 2.0
    assert traffic.compute(recs)["concurrency_mean"] == pytest.approx(1.5)  # without it: a ramp-down
