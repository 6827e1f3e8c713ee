"""The load a point offered and the load it carried, from per-request records.

A point is saturated when the server (or the client's concurrency cap) cannot keep up with the
arrivals: requests then complete more slowly than they arrive (``achieved_rate < offered_rate``) and
pile up in flight or in the client's queue. Rates use one estimator for both sides, (n − 1) over the
span of n events, so an unsaturated point reads achieved ≈ offered whatever its latency. Over a few
dozen requests the first and last latencies still move achieved by some 20% either way (a burst early
in the schedule drains and reads above offered); saturation reads below by the queue it builds.
"""

from __future__ import annotations

from collections.abc import Sequence

from specexp.metrics.requests import summarize, window_s
from specexp.records import RequestRecord


def events_rate(times: Sequence[float]) -> float | None:
    """(n − 1) / (last − first): the rate of a sequence of events; None for fewer than two or no span."""
    if len(times) < 2:
        return None
    span = max(times) - min(times)
    return (len(times) - 1) / span if span > 0 else None


def concurrency(records: Sequence[RequestRecord]) -> dict[str, float]:
    """Requests in flight (send → end) over the window: the time-weighted mean (Little's law: Σ
    durations / window) and the most at once."""
    spans = [(r.send, r.end) for r in records if r.end is not None]
    window = window_s(records)
    if not spans or window <= 0:
        return {}
    # at equal times an end comes before a send, so back-to-back requests never count as overlapping
    events = sorted([(end, -1) for _, end in spans] + [(send, 1) for send, _ in spans])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return {"concurrency_mean": sum(end - send for send, end in spans) / window, "concurrency_max": float(peak)}


def compute(records: Sequence[RequestRecord]) -> dict[str, float]:
    """``concurrency_mean``/``_max`` for any load; an open loop's (records with an arrival) also
    ``offered_rate``, ``achieved_rate`` and ``queue_ms_*`` (arrival → send)."""
    out = concurrency(records)
    arrived = [r for r in records if r.arrival is not None]
    if not arrived:
        return out
    offered = events_rate([r.arrival for r in arrived])
    achieved = events_rate([r.end for r in arrived if r.ok and r.chunks and r.end is not None])
    out |= {"offered_rate": offered} if offered is not None else {}
    out |= {"achieved_rate": achieved} if achieved is not None else {}
    return out | summarize("queue_ms", [(r.send - r.arrival) * 1e3 for r in arrived])
