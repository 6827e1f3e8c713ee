"""Goodput, SLO attainment and the load carried, from hand-made records with known outcomes."""

from __future__ import annotations

import numpy as np
import pytest

from specexp.config import MeasureConfig, SloConfig
from specexp.metrics import slo, traffic
from specexp.metrics.window_results import aggregate
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
    # an open loop's goodput is at the rate its arrivals came (1 req/s over 0-4 s), the share that met
    assert out["goodput"] == pytest.approx(1.0 * 2 / 5)
    assert out["goodput"] <= traffic.compute(RECORDS)["achieved_rate"] == pytest.approx(1.0 * 4 / 5)  # 4 ok
    closed = [record(r.index, None, r.send, 0.05, 0.01) for r in RECORDS]  # a closed loop: over the window
    assert slo.compute(closed, SloConfig(ttft_ms=100))["goodput"] == pytest.approx(5 / closed[-1].end)


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
    assert out["achieved_rate"] == pytest.approx(1.0)  # every arrival served: the offered rate
    # the completions after the first over their own span: 3 in 3.3 s (request 2 ended 0.3 s late)
    assert out["completions"] == 3 and out["completion_rate"] == pytest.approx(3 / (ends[-1] - ends[0]))
    assert out["queue_ms_p50"] == pytest.approx(0.0) and out["queue_ms_mean"] == pytest.approx(300 / 4)
    assert out["concurrency_max"] == 1.0  # never two at once
    assert out["concurrency_mean"] == pytest.approx(4 * 0.5 / (ends[-1] - 0.0))


def poisson_windows(rate: float, service_s: float | None, windows: int = 8, n: int = 8) -> list[dict[str, float]]:
    """Windows of ``n`` Poisson arrivals at ``rate``: each request takes 0.3-0.8 s (seeded), or with
    ``service_s`` the server serves one at a time in that long, so requests queue."""
    rng = np.random.default_rng(3)
    out, t, free = [], 0.0, 0.0
    for _ in range(windows):
        recs = []
        for i in range(n):
            t += rng.exponential(1 / rate)
            send = t if service_s is None else max(t, free)
            took = rng.uniform(0.3, 0.8) if service_s is None else service_s
            free = send + took
            recs.append(record(i, t, send, ttft=took / 2, tpot=took / 8))
        out.append(traffic.compute(recs))
    return out


def test_an_unsaturated_point_achieves_its_offered_rate_and_is_not_called_saturated() -> None:
    """The issue's point: achieved 0.75 at an offered 1 req/s, which the README's rule called saturated."""
    point = aggregate(poisson_windows(1.0, None), MeasureConfig(windows=8))
    assert point["achieved_rate"] == pytest.approx(point["offered_rate"])
    assert point["completion_rate_lo"] < point["offered_rate"] < point["completion_rate_hi"]
    assert point["saturated"] == 0.0


def test_a_saturated_point_completes_less_than_it_was_offered() -> None:
    # arrivals at 10 req/s, served one at a time in 0.5 s each: completions 2 per second
    windows = poisson_windows(10.0, 0.5)
    point = aggregate(windows, MeasureConfig(windows=8))
    assert point["offered_rate"] == pytest.approx(10.0, rel=0.3)
    assert point["achieved_rate"] == pytest.approx(point["offered_rate"])  # every arrival was served, late
    assert point["completion_rate"] == pytest.approx(2.0, rel=0.05) and point["saturated"] == 1.0
    assert max(w["queue_ms_p99"] for w in windows) > 3000


def test_achieved_never_exceeds_offered_nor_goodput_achieved_when_a_burst_drains() -> None:
    # a burst: arrivals at 0, 0.01, 0.02, then 1.0; the first three are slow, the last one fast, so the
    # ends come closer together than the arrivals (the old estimator read twice the offered rate)
    recs = [
        record(i, a, a, ttft=t, tpot=0.0, tokens=1)
        for i, (a, t) in enumerate([(0, 0.9), (0.01, 0.9), (0.02, 0.9), (1.0, 0.01)])
    ]
    out = traffic.compute(recs)
    assert out["offered_rate"] == pytest.approx(3 / 1.0)
    assert out["achieved_rate"] <= out["offered_rate"]
    assert out["completion_rate"] > out["offered_rate"]  # the ends came closer together than the arrivals
    assert slo.compute(recs, SloConfig(ttft_ms=1000))["goodput"] <= out["achieved_rate"]


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
