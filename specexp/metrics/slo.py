"""Goodput: the requests that met every latency target (specexp.config.SloConfig), per second and as
a fraction of the requests sent.

TTFT counts from a request's arrival (its scheduled arrival in an open loop), so time spent waiting
for a slot in the client counts against it as it would for a user; TPOT is the request's own. A
failed request meets no target; a request with a single output token has no TPOT and meets any.
"""

from __future__ import annotations

from collections.abc import Sequence

from specexp.config import SloConfig
from specexp.metrics.requests import e2e_s, ttft_s, window_s
from specexp.metrics.traffic import arrival_span
from specexp.records import RequestRecord


def meets(r: RequestRecord, slo: SloConfig) -> bool:
    if not (r.ok and r.chunks):
        return False
    first = r.chunks[0].t - r.arrived
    if slo.ttft_ms is not None and first * 1e3 > slo.ttft_ms:
        return False
    if slo.tpot_ms is not None and r.output_tokens > 1:
        tpot = (e2e_s(r) - ttft_s(r)) / (r.output_tokens - 1)
        if tpot * 1e3 > slo.tpot_ms:
            return False
    return True


def compute(records: Sequence[RequestRecord], slo: SloConfig) -> dict[str, float]:
    """``goodput``, ``slo_met`` (the requests meeting every target) and ``slo_attainment`` (their share
    of the measured requests); {} when no target is set. An open loop's goodput is over its arrival
    span, as its achieved rate is (specexp.metrics.traffic: offered × met / n, so goodput ≤ achieved);
    a closed loop's over the window's seconds."""
    if not slo.given or not records:
        return {}
    good = sum(meets(r, slo) for r in records)
    out = {"slo_met": float(good), "slo_attainment": good / len(records)}
    if (arrivals := arrival_span(records)) is not None:
        n, seconds = arrivals
        return out | {"goodput": (n - 1) / seconds * good / n}
    window = window_s(records)
    return out | ({"goodput": good / window} if window > 0 else {})
