"""The client-side metrics (specexp.metrics.registry) as pure functions over per-request records.

Times are the client's monotonic seconds; latencies are reported in milliseconds. Only measured
(non-warm-up) records are passed in; failed requests count in ``requests_failed`` and nowhere else.
A closed loop's fillers (``RequestRecord.filler``: requests that keep ``batch`` in flight until the
window's last measured request ends) count in the window's throughput (their requests that ended and
their tokens that arrived within the window) and nowhere else, so throughput is the server's steady
rate at the labelled load, not a ramp-down's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specexp.records import RequestRecord

PERCENTILES = (50, 90, 99)
LENGTH_PERCENTILES = (50, 90)


def summarize(name: str, samples: Sequence[float], percentiles: Sequence[int] = PERCENTILES) -> dict[str, float]:
    """``name_mean`` and ``name_p50/p90/p99`` (linear interpolation); {} without samples."""
    if not samples:
        return {}
    arr = np.asarray(samples, dtype=float)
    out = {f"{name}_mean": float(arr.mean())}
    for p in percentiles:
        out[f"{name}_p{p}"] = float(np.percentile(arr, p))
    return out


def ttft_s(r: RequestRecord) -> float:
    return r.chunks[0].t - r.send


def e2e_s(r: RequestRecord) -> float:
    return r.chunks[-1].t - r.send


def itl_samples(r: RequestRecord) -> list[float]:
    """Token-normalised gaps: a chunk of n tokens after a gap g gives n samples of g / n."""
    out: list[float] = []
    for prev, cur in zip(r.chunks, r.chunks[1:], strict=False):
        if cur.tokens > 0:
            out.extend([(cur.t - prev.t) / cur.tokens] * cur.tokens)
    return out


def chunk_gaps(r: RequestRecord) -> list[float]:
    return [cur.t - prev.t for prev, cur in zip(r.chunks, r.chunks[1:], strict=False)]


def measured(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The window's own requests: its fillers left out."""
    return [r for r in records if not r.filler]


def span(records: Sequence[RequestRecord]) -> tuple[float, float] | None:
    """The window: its first measured send to its last measured response's end; None without an end."""
    own = measured(records)
    ends = [r.end for r in own if r.end is not None]
    return (min(r.send for r in own), max(ends)) if ends else None


def window_s(records: Sequence[RequestRecord]) -> float:
    """The window's seconds (``span``); 0 without one."""
    bounds = span(records)
    return bounds[1] - bounds[0] if bounds else 0.0


def in_window(records: Sequence[RequestRecord]) -> tuple[int, int, int]:
    """Requests that ended ok within the window, and the output and input tokens it served: the
    measured requests' and what of the fillers arrived before the window's end."""
    bounds = span(records)
    done = output = prompt = 0
    for r in records:
        if r.filler:
            if bounds is None:
                continue
            arrived = [c for c in r.chunks if c.t <= bounds[1]]
            output += sum(c.tokens for c in arrived)
            prompt += (r.prompt_tokens or 0) if arrived else 0
            done += r.ok and r.end is not None and r.end <= bounds[1]
        elif r.ok and r.chunks:
            done, output, prompt = done + 1, output + r.output_tokens, prompt + (r.prompt_tokens or 0)
    return done, output, prompt


def compute(records: Sequence[RequestRecord]) -> dict[str, float]:
    """Every client-side METRICS.md key for one measured window."""
    own = measured(records)
    ok = [r for r in own if r.ok and r.chunks]
    out: dict[str, float] = {"requests_ok": len(ok), "requests_failed": len(own) - len(ok)}
    output_tokens = sum(r.output_tokens for r in ok)
    out["output_tokens"] = output_tokens
    out["input_tokens"] = sum(r.prompt_tokens or 0 for r in ok)
    window = window_s(records)
    if window > 0:
        done, served, prompt = in_window(records)
        out["window_s"] = window
        out["window_output_tokens"] = served
        out["output_throughput"] = served / window
        out["request_throughput"] = done / window
        out["total_throughput"] = (prompt + served) / window
    tpot = []
    for r in ok:
        decode_s = e2e_s(r) - ttft_s(r)
        if r.output_tokens > 1 and decode_s > 0:
            tpot.append(decode_s / (r.output_tokens - 1) * 1e3)
    out |= decode_speed(ok)
    out |= summarize("ttft_ms", [ttft_s(r) * 1e3 for r in ok])
    out |= summarize("tpot_ms", tpot)
    out |= summarize("itl_ms", [s * 1e3 for r in ok for s in itl_samples(r)])
    out |= summarize("chunk_gap_ms", [s * 1e3 for r in ok for s in chunk_gaps(r)])
    out |= summarize("e2e_ms", [e2e_s(r) * 1e3 for r in ok])
    chunks = sum(len(r.chunks) for r in ok)
    if chunks:
        out["tokens_per_chunk_mean"] = output_tokens / chunks
    out |= summarize("input_len", [r.prompt_tokens for r in ok if r.prompt_tokens is not None], LENGTH_PERCENTILES)
    out |= summarize("output_len", [r.output_tokens for r in ok], LENGTH_PERCENTILES)
    return out


def decode_span(r: RequestRecord) -> tuple[int, float] | None:
    """A request's decode: the tokens after its first chunk and the seconds from its first chunk to its
    last; None when it has no decode rate (one chunk, or no time between its first and last)."""
    tokens, seconds = r.output_tokens - r.chunks[0].tokens, r.chunks[-1].t - r.chunks[0].t
    return (tokens, seconds) if tokens > 0 and seconds > 0 else None


def decode_speed(ok: Sequence[RequestRecord]) -> dict[str, float]:
    """``decode_speed`` as a ratio of sums, Σ tokens after the first chunk / Σ seconds from first to last
    chunk over the requests that have a decode (a mean of per-request rates is ruled by the shortest:
    one request whose last chunks came microseconds apart read 30,807 tok/s), its sums for the point's
    ratio over windows, ``decode_excluded`` (the requests without a decode) and the per-request
    median ``decode_speed_p50``."""
    spans = [s for r in ok if (s := decode_span(r)) is not None]
    out = {"decode_excluded": float(len(ok) - len(spans))}
    if spans:
        tokens, seconds = (float(sum(part)) for part in zip(*spans, strict=True))
        out |= {"decode_tokens": tokens, "decode_s": seconds, "decode_speed": tokens / seconds}
        out["decode_speed_p50"] = float(np.median([t / s for t, s in spans]))
    return out


def token_source(records: Sequence[RequestRecord]) -> str:
    """``usage`` when every successful request's count came from the server, else ``chunks``."""
    ok = [r for r in measured(records) if r.ok]
    return "usage" if ok and all(r.token_source == "usage" for r in ok) else "chunks"


def pooled_throughput(windows: Sequence[dict[str, float]]) -> dict[str, float]:
    """``output_throughput_pooled``: Σ tokens served within the windows / Σ their seconds (the point's
    rate whatever its windows' lengths); {} when no window has a span."""
    seconds = sum(w.get("window_s", 0.0) for w in windows)
    tokens = sum(w.get("window_output_tokens", 0.0) for w in windows)
    return {"output_throughput_pooled": tokens / seconds} if seconds > 0 else {}
