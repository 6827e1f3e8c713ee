"""The load a point offered and the load it carried, from per-request records.

Concurrency is the time-weighted number of requests in flight over the window (specexp.metrics.requests
``span``), a closed loop's fillers included: they are what keeps ``batch`` in flight to its end.

An open loop offers and carries over spans of one length S, its arrivals' (first to last): offered is
the n − 1 arrivals after the first over S; achieved the successful completions after the first
request's end within S of it (the arrival span shifted by the first request's latency) over S. At most
the n − 1 requests after the first can end there, so achieved ≤ offered by construction; an unsaturated
point reads achieved ≈ offered up to its latencies' spread, a saturated one the rate it completes
requests at.
"""

from __future__ import annotations

from collections.abc import Sequence

from specexp.metrics.requests import span, summarize
from specexp.records import RequestRecord


def concurrency(records: Sequence[RequestRecord]) -> dict[str, float]:
    """Requests in flight (send → end, clipped to the window) over the window: the time-weighted mean
    (Little's law: Σ durations / window) and the most at once."""
    bounds = span(records)
    if bounds is None or bounds[1] <= bounds[0]:
        return {}
    start, stop = bounds
    spans = [(max(r.send, start), min(r.end, stop)) for r in records if r.end is not None]
    spans = [(s, e) for s, e in spans if e > s]
    # at equal times an end comes before a send, so back-to-back requests never count as overlapping
    events = sorted([(end, -1) for _, end in spans] + [(send, 1) for send, _ in spans])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return {"concurrency_mean": sum(e - s for s, e in spans) / (stop - start), "concurrency_max": float(peak)}


def rates(arrivals: Sequence[float], ends: Sequence[float]) -> dict[str, float]:
    """``offered_rate`` and ``achieved_rate`` (see the module docstring) from the arrivals and the
    successful ends; {} for fewer than two arrivals or no span."""
    if len(arrivals) < 2:
        return {}
    seconds = max(arrivals) - min(arrivals)
    if seconds <= 0:
        return {}
    out = {"offered_rate": (len(arrivals) - 1) / seconds}
    if ends:
        first = min(ends)
        out["achieved_rate"] = sum(first < end <= first + seconds for end in ends) / seconds
    return out


def compute(records: Sequence[RequestRecord]) -> dict[str, float]:
    """``concurrency_mean``/``_max`` for any load; an open loop's (records with an arrival) also
    ``offered_rate``, ``achieved_rate`` and ``queue_ms_*`` (arrival → send)."""
    out = concurrency(records)
    arrived = [r for r in records if r.arrival is not None and not r.filler]
    if not arrived:
        return out
    ends = [r.end for r in arrived if r.ok and r.chunks and r.end is not None]
    out |= rates([r.arrival for r in arrived], ends)
    return out | summarize("queue_ms", [(r.send - r.arrival) * 1e3 for r in arrived])
