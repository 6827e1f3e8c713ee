"""The METRICS.md definitions as pure functions over per-request records.

Times are the client's monotonic seconds; latencies are reported in milliseconds. Only measured
(non-warm-up) records are passed in; failed requests count in ``requests_failed`` and nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specexp.load.records import RequestRecord

PERCENTILES = (50, 90, 99)


def summarize(name: str, samples: Sequence[float]) -> dict[str, float]:
    """``name_mean`` and ``name_p50/p90/p99`` (linear interpolation); {} without samples."""
    if not samples:
        return {}
    arr = np.asarray(samples, dtype=float)
    out = {f"{name}_mean": float(arr.mean())}
    for p in PERCENTILES:
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


def window_s(records: Sequence[RequestRecord]) -> float:
    """First measured send to the last measured response's end."""
    ends = [r.end for r in records if r.end is not None]
    return max(ends) - min(r.send for r in records) if ends else 0.0


def compute(records: Sequence[RequestRecord]) -> dict[str, float]:
    """Every client-side METRICS.md key for one measured window."""
    ok = [r for r in records if r.ok and r.chunks]
    out: dict[str, float] = {"requests_ok": len(ok), "requests_failed": len(records) - len(ok)}
    output_tokens = sum(r.output_tokens for r in ok)
    input_tokens = sum(r.prompt_tokens or 0 for r in ok)
    out["output_tokens"] = output_tokens
    out["input_tokens"] = input_tokens
    window = window_s(records)
    if window > 0:
        out["output_throughput"] = output_tokens / window
        out["request_throughput"] = len(ok) / window
        out["total_throughput"] = (input_tokens + output_tokens) / window
    decode_speed, tpot = [], []
    for r in ok:
        decode_s = e2e_s(r) - ttft_s(r)
        if r.output_tokens > 1 and decode_s > 0:
            decode_speed.append((r.output_tokens - 1) / decode_s)
            tpot.append(decode_s / (r.output_tokens - 1) * 1e3)
    if decode_speed:
        out["decode_speed_mean"] = float(np.mean(decode_speed))
        out["decode_speed_p50"] = float(np.median(decode_speed))
    out |= summarize("ttft_ms", [ttft_s(r) * 1e3 for r in ok])
    out |= summarize("tpot_ms", tpot)
    out |= summarize("itl_ms", [s * 1e3 for r in ok for s in itl_samples(r)])
    out |= summarize("chunk_gap_ms", [s * 1e3 for r in ok for s in chunk_gaps(r)])
    out |= summarize("e2e_ms", [e2e_s(r) * 1e3 for r in ok])
    chunks = sum(len(r.chunks) for r in ok)
    if chunks:
        out["tokens_per_chunk_mean"] = output_tokens / chunks
    return out


def token_source(records: Sequence[RequestRecord]) -> str:
    """``usage`` when every successful request's count came from the server, else ``chunks``."""
    ok = [r for r in records if r.ok]
    return "usage" if ok and all(r.token_source == "usage" for r in ok) else "chunks"


# Two-sided 95% Student-t quantiles by degrees of freedom; 1.96 beyond the table.
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    25: 2.060,
    30: 2.042,
}
COUNT_KEYS = (
    "requests_ok",
    "requests_failed",
    "output_tokens",
    "input_tokens",
    "spec_verify_steps",
    "spec_draft_tokens",
    "spec_accepted_tokens",
)


def t95(df: int) -> float:
    """The 97.5% t quantile for ``df`` degrees of freedom (conservative between table rows)."""
    return next((_T95[d] for d in sorted(_T95) if d >= df), 1.96) if df <= 30 else 1.96


def mean_ci(samples: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (0 for a single sample)."""
    arr = np.asarray(samples, dtype=float)
    if arr.size < 2:
        return float(arr.mean()), 0.0
    return float(arr.mean()), t95(arr.size - 1) * float(arr.std(ddof=1)) / np.sqrt(arr.size)


def aggregate_repeats(repeats: Sequence[dict[str, float]]) -> dict[str, float]:
    """One point measured N times: counts summed; every other key its mean, plus ``<key>_ci95``
    (the 95% half-width) and ``<key>_std`` over the repeats."""
    out: dict[str, float] = {"repeats": len(repeats)}
    keys = set().union(*repeats)
    for key in sorted(keys):
        values = [r[key] for r in repeats if key in r]
        if key in COUNT_KEYS:
            out[key] = float(sum(values))
            continue
        mean, half = mean_ci(values)
        out[key] = mean
        if len(values) > 1:
            out[f"{key}_ci95"] = half
            out[f"{key}_std"] = float(np.std(values, ddof=1))
    return out
