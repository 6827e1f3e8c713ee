"""The load a point offered and the load it carried, from per-request records.

Concurrency is the time-weighted number of requests in flight over the window (specexp.metrics.requests
``span``), a closed loop's fillers included: they are what keeps ``batch`` in flight to its end.

An open loop's rates are read over its arrival span S (first to last scheduled arrival of the n
measured requests), so that a server that keeps up reads the rate it was offered: ``offered_rate`` =
(n − 1) / S, ``achieved_rate`` the same arrivals' rate counting only those served ok (offered × ok / n),
and goodput (specexp.metrics.slo) those that also met the SLO: goodput ≤ achieved ≤ offered by
construction. Whether completions keep up is checked separately: ``completion_rate`` is the successful
completions after the first over the span from the first end to the last, pooled over a point's
windows (a ratio of sums with the ratio estimator's interval), and a point is ``saturated`` only when
that interval lies wholly below the offered rate (specexp.metrics.window_results).
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


def arrival_span(records: Sequence[RequestRecord]) -> tuple[int, float] | None:
    """An open loop's measured arrivals: their count n and their span S (first to last); None for a
    closed loop, fewer than two arrivals, or no span."""
    arrivals = [r.arrival for r in records if r.arrival is not None and not r.filler]
    if len(arrivals) < 2 or max(arrivals) <= min(arrivals):
        return None
    return len(arrivals), max(arrivals) - min(arrivals)


def rates(records: Sequence[RequestRecord]) -> dict[str, float]:
    """``offered_rate`` and ``achieved_rate`` over the arrival span, and the completions' own count and
    span (``completions``, ``completion_s``, ``completion_rate``: see the module docstring); {} without
    an arrival span."""
    found = arrival_span(records)
    if found is None:
        return {}
    n, seconds = found
    arrived = [r for r in records if r.arrival is not None and not r.filler]
    ends = sorted(r.end for r in arrived if r.ok and r.chunks and r.end is not None)
    offered = (n - 1) / seconds
    out = {"offered_rate": offered, "achieved_rate": offered * len(ends) / n}
    if len(ends) >= 2 and ends[-1] > ends[0]:
        after_first, span_s = float(len(ends) - 1), ends[-1] - ends[0]
        out |= {"completions": after_first, "completion_s": span_s, "completion_rate": after_first / span_s}
    return out


def compute(records: Sequence[RequestRecord]) -> dict[str, float]:
    """``concurrency_mean``/``_max`` for any load; an open loop's (records with an arrival) also
    ``offered_rate``, ``achieved_rate``, the completions' rate and ``queue_ms_*`` (arrival → send)."""
    out = concurrency(records)
    arrived = [r for r in records if r.arrival is not None and not r.filler]
    if not arrived:
        return out
    out |= rates(arrived)
    return out | summarize("queue_ms", [(r.send - r.arrival) * 1e3 for r in arrived])
