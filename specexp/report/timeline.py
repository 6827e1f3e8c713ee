"""The timeline of a changing load, one replay: the offered rate and each arm's running requests, TPOT
and goodput over time, its phases shaded, as a PNG (matplotlib, no display)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from specexp.report.phases import Placed, tpot_s


def _bins(edges: Sequence[float]) -> np.ndarray:
    """Time bins across the replay: four to the shortest phase (rates of a handful of requests a bin
    would be all noise), at least half a second wide."""
    width = max(0.5, min(np.diff(edges)) / 4)
    return np.arange(edges[0], edges[-1] + width / 2, width)


def _running(placed: Sequence[Placed], times: np.ndarray) -> np.ndarray:
    """Requests in flight (sent, not ended) at each time (seconds from the window's start)."""
    spans = [(p.record.send - p.origin, (p.record.end or p.record.send) - p.origin) for p in placed]
    return np.array([sum(a <= t < b for a, b in spans) for t in times])


def draw(
    arms: Mapping[str, Sequence[Placed]], edges: Sequence[float], good: Callable[[Placed], bool], path: Path
) -> Path:
    """One replay (each arm's first) of every arm: offered rate and running requests, TPOT per request
    (median per bin), goodput per bin (``good``: the request met slo.*), phases shaded."""
    bins = _bins(edges)
    centers = (bins[:-1] + bins[1:]) / 2
    width = bins[1] - bins[0]
    fig = Figure(figsize=(10, 8), layout="constrained")
    rate, tpot, goodput = fig.subplots(3, 1, sharex=True)
    for ax in (rate, tpot, goodput):
        for k, (lo, hi) in enumerate(itertools.pairwise(edges)):
            ax.axvspan(lo, hi, color="0.85" if k % 2 else "0.93", zorder=0)
    offered_drawn = False
    for arm, placed in arms.items():
        replay = min(p.replay for p in placed)
        mine = [p for p in placed if p.replay == replay]
        at = np.array([p.record.extra["arrival_s"] for p in mine])
        if not offered_drawn:
            rate.step(centers, np.histogram(at, bins)[0] / width, where="mid", color="black", label="offered (req/s)")
            offered_drawn = True
        rate.plot(centers, _running(mine, centers), label=f"{arm}: running")
        tpots = [(a, t * 1e3) for a, p in zip(at, mine, strict=True) if (t := tpot_s(p.record)) is not None]
        if tpots:
            x, y = np.array(tpots).T
            dots = tpot.plot(x, y, ".", alpha=0.3, markersize=3)[0]
            which = np.digitize(x, bins) - 1
            medians = [np.median(y[which == i]) if np.any(which == i) else np.nan for i in range(len(centers))]
            tpot.plot(centers, medians, color=dots.get_color(), label=arm)
        met = np.histogram(at[[good(p) for p in mine]] if mine else at, bins)[0] / width
        goodput.step(centers, met, where="mid", label=arm)
    rate.set_ylabel("requests/s, running")
    tpot.set_ylabel("TPOT (ms)")
    goodput.set_ylabel("goodput (req/s)")
    goodput.set_xlabel("seconds into the replay (phases shaded)")
    for ax in (rate, tpot, goodput):
        ax.legend(fontsize="small", loc="upper right")
    fig.savefig(path, dpi=110, format="png")
    return path
