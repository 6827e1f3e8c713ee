"""Open-loop arrival schedules: when each request of a point arrives, from a seeded generator.

Gaps between arrivals are gamma-distributed with shape ``burstiness`` (shape 1 is exponential: a
Poisson process), as in vLLM's ``bench serve --burstiness``, then scaled so that the n arrivals span
exactly (n − 1) / rate: a point of a few dozen requests offers the rate it is plotted at, not a draw
30% off it, and only the spacing within its window is random (a Poisson process conditioned on its
arrival count). The draws depend on the seed and the shape only, so the points of a rate sweep (and
a drafter and its baseline) see the same schedule compressed or stretched: their differences are
the rate's, not the dice's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def arrival_times(n: int, rate: float, burstiness: float, seed: Sequence[int]) -> list[float]:
    """Seconds from the start of the window at which each of ``n`` requests arrives; the first at 0,
    the last at (n − 1) / rate."""
    if n < 2:
        return [0.0] * n
    gaps = np.random.default_rng(list(seed)).gamma(burstiness, 1.0, size=n - 1)
    return [0.0, *(np.cumsum(gaps) * ((n - 1) / rate / gaps.sum())).tolist()]
