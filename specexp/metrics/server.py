"""Server-side truth per window: the engine's own latency histograms, read as deltas around the window.

vLLM, SGLang and the reference engine publish request latency histograms on /metrics (seconds, observed
as each request finishes, from its arrival at the server). Σ/count of a family's delta is its mean over
the window's requests, independent of the client's clock, so it tells whether the client (its event
loop, its parsing) rather than the server set the client's numbers. TTFT is left out of the gap: the
client's includes the HTTP round trip and the server's does not.
"""

from __future__ import annotations

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


def gaps(window: dict[str, float]) -> dict[str, float]:
    """|client / server − 1| for each compared mean the window has on both sides."""
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
    """A sentence naming the means the client and the server disagree on by more than GAP_WARNING; None."""
    far = [
        f"{client} {window[client]:.2f} against the server's {window[COMPARED[client]]:.2f}"
        for client, rel in gaps(window).items()
        if rel > GAP_WARNING
    ]
    return "; ".join(far) or None
