"""Open-loop arrival schedules: when each request of a point arrives, from a seeded generator.

Gaps between arrivals are gamma-distributed with shape ``burstiness`` and mean ``1 / rate`` (shape 1
is exponential: a Poisson process), as in vLLM's ``bench serve --burstiness``. The draws depend on
the seed and the shape only and are scaled by ``1 / rate``, so the points of a rate sweep (and a
drafter and its baseline) see the same schedule compressed or stretched: their differences are the
rate's, not the dice's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def arrival_times(n: int, rate: float, burstiness: float, seed: Sequence[int]) -> list[float]:
    """Seconds from the start of the window at which each of ``n`` requests arrives; the first at 0."""
    if n < 1:
        return []
    gaps = np.random.default_rng(list(seed)).gamma(burstiness, 1.0 / burstiness, size=n - 1) / rate
    return [0.0, *np.cumsum(gaps).tolist()]
