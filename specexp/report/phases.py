"""A changing load's results per phase (a profile's steps, a trace's slices): what each arm was offered
and achieved, how many requests it kept running, its goodput, latencies and acceptance, phase by phase.

Pure functions over one point's per-request records. A request belongs to the phase its arrival falls
in (extra ``arrival_s``: seconds from its window's start, specexp.load.client), so the same request is
in the same phase for every arm; rates are over the phase's seconds summed over the replays (windows)
pooled. Completions, running requests and tokens are counted by when they happened within the phase.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from specexp.config import SloConfig
from specexp.metrics.slo import meets
from specexp.records import RequestRecord

Replay = tuple[int, int]  # (repeat, window): one replay of the schedule, the same for every arm


@dataclass(frozen=True)
class Placed:
    """A measured request, where it is: its replay, its window's start (monotonic s) and its phase."""

    replay: Replay
    origin: float
    phase: int
    record: RequestRecord


def place(records: Sequence[RequestRecord], edges: Sequence[float], repeat: int = 0) -> list[Placed]:
    """The measured (not warm-up, not filler) open-loop records, each in the phase of its arrival;
    records arriving outside the edges are left out."""
    out = []
    for r in records:
        at = r.extra.get("arrival_s")
        if r.warmup or r.filler or at is None or r.arrival is None or r.window is None:
            continue
        phase = int(np.searchsorted(edges, at, side="right")) - 1
        if 0 <= phase < len(edges) - 1:
            out.append(Placed((repeat, r.window), r.arrival - at, phase, r))
    return out


def _overlap(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


def _percentiles(prefix: str, samples: list[float]) -> dict[str, float]:
    if not samples:
        return {f"{prefix}_p50_ms": math.nan, f"{prefix}_p90_ms": math.nan}
    p50, p90 = np.percentile(np.asarray(samples) * 1e3, [50, 90])
    return {f"{prefix}_p50_ms": float(p50), f"{prefix}_p90_ms": float(p90)}


def tpot_s(r: RequestRecord) -> float | None:
    """Seconds per output token after the first; None for a failed or one-token request."""
    if not (r.ok and r.chunks) or r.output_tokens < 2:
        return None
    return (r.chunks[-1].t - r.chunks[0].t) / (r.output_tokens - 1)


def _acceptance(placed: Sequence[Placed]) -> dict[str, float]:
    """Acceptance length (1 + accepted per verify step) and the depth drafted (proposed per verify step)
    from the engines' per-request counts (specexp.engines.sglang.spec_counts); nan where none reports."""
    spec = [p.record.extra for p in placed if p.record.ok and p.record.extra.get("spec_verify_ct")]
    steps = float(sum(e["spec_verify_ct"] for e in spec))
    accepted = [e["spec_num_correct_drafts"] for e in spec if "spec_num_correct_drafts" in e]
    proposed = [e["spec_num_proposed_drafts"] for e in spec if "spec_num_proposed_drafts" in e]
    return {
        "accept_length": 1 + sum(accepted) / steps if spec and len(accepted) == len(spec) else math.nan,
        "depth_drafted": sum(proposed) / steps if spec and len(proposed) == len(spec) else math.nan,
    }


def phase_metrics(placed: Sequence[Placed], edges: Sequence[float], slo: SloConfig) -> list[dict[str, float]]:
    """One row per phase: offered and achieved rate, mean running requests, goodput with its 95%
    Clopper-Pearson interval (the share meeting slo.* is binomial; without targets every whole request
    counts), TTFT/TPOT p50/p90, output
    throughput, acceptance length, depth drafted, and the requests whose asked output length (a
    trace's) was not met."""
    replays = sorted({p.replay for p in placed})
    rows = []
    for k, (lo, hi) in enumerate(itertools.pairwise(edges)):
        seconds = (hi - lo) * len(replays)
        mine = [p for p in placed if p.phase == k]
        records = [p.record for p in mine]
        met = sum(meets(r, slo) for r in records) if slo.given else sum(r.ok for r in records)
        ci = stats.binomtest(met, len(records)).proportion_ci() if records else None
        offered = len(records) / seconds if seconds else math.nan
        ended = running = tokens = 0.0
        for p in placed:  # any request may end, run or stream within this phase, whatever phase it arrived in
            r, a, b = p.record, lo + p.origin, hi + p.origin
            ended += r.ok and r.end is not None and a <= r.end < b
            running += _overlap(r.send, r.end if r.end is not None else r.send, a, b)
            tokens += sum(c.tokens for c in r.chunks if a <= c.t < b)
        ok = [r for r in records if r.ok and r.chunks]
        short = [r for r in records if "output_asked" in r.extra and r.output_tokens < r.extra["output_asked"]]
        rows.append(
            {
                "phase": k + 1,
                "start_s": lo,
                "end_s": hi,
                "replays": len(replays),
                "requests": len(records),
                "offered": offered,
                "achieved": ended / seconds if seconds else math.nan,
                "running": running / seconds if seconds else math.nan,
                "goodput": met / seconds if seconds else math.nan,
                "goodput_lo": ci.low * offered if ci else math.nan,
                "goodput_hi": ci.high * offered if ci else math.nan,
                **_percentiles("ttft", [r.chunks[0].t - r.arrived for r in ok]),
                **_percentiles("tpot", [t for r in ok if (t := tpot_s(r)) is not None]),
                "output_throughput": tokens / seconds if seconds else math.nan,
                **_acceptance(mine),
                "lengths_short": len(short),
            }
        )
    return rows
