"""Arrivals at a rate that changes in steps (``load.profile``): load=rate's process, step by step.

As in a constant-rate window (specexp.load.arrivals), each step offers exactly its rate: it gets
round(rate x seconds) arrivals, spaced by gamma gaps of shape ``burstiness`` (shape 1: a Poisson
process conditioned on its count, whose arrivals are uniform over the step) scaled so that the step's
n + 1 gaps fill it. So a phase's offered rate is the one asked, not a draw 30% off it, and only the
spacing within a step is random. Each step draws from (seed, step): every arm replays the same times.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Step = tuple[float, float, float]  # start s, end s, requests/s (LoadConfig.steps)


def profile_arrivals(steps: Sequence[Step], burstiness: float, seed: Sequence[int]) -> list[float]:
    """Seconds from the window's start at which each request arrives, in order, all inside their step."""
    out: list[float] = []
    for k, (start, end, rate) in enumerate(steps):
        n = round(rate * (end - start))
        gaps = np.random.default_rng([*seed, k]).gamma(burstiness, 1.0, size=n + 1)
        out += (start + np.cumsum(gaps)[:-1] * ((end - start) / gaps.sum())).tolist()
    return out


def phase_edges(steps: Sequence[Step]) -> list[float]:
    """The phases' edges in seconds: every step's start, then the last one's end."""
    return [*(s for s, _, _ in steps), steps[-1][1]]
