"""Arrivals at a rate that changes in steps (``load.profile``): load=rate's process, the rate a function
of time.

Time rescaling: a renewal process of unit rate (gamma gaps of shape ``burstiness`` and mean 1; shape 1
is Poisson) is drawn in "operational time", the integral of the rate, and mapped back through that
integral, so a step at rate r gets r arrivals a second on average with the same burstiness and no
restart at a step's edge. Unlike a constant-rate window (specexp.load.arrivals) the count is not
pinned: a step's count varies as the process's does, and phases report the rate actually offered. The
draws depend on the seed and the shape only, so every arm replays the same arrival times.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Step = tuple[float, float, float]  # start s, end s, requests/s (LoadConfig.steps)


def profile_arrivals(steps: Sequence[Step], burstiness: float, seed: Sequence[int]) -> list[float]:
    """Seconds from the window's start at which each request arrives, in order, all before the last
    step's end."""
    work = np.cumsum([0.0, *((end - start) * rate for start, end, rate in steps)])  # operational time at edges
    rng = np.random.default_rng(list(seed))
    drawn = np.empty(0)
    while drawn.size == 0 or drawn[-1] < work[-1]:  # enough unit-rate arrivals to pass the end
        more = rng.gamma(burstiness, 1.0 / burstiness, size=int(work[-1] + 10 * np.sqrt(work[-1] + 1)) + 8)
        drawn = np.concatenate([drawn, (drawn[-1] if drawn.size else 0.0) + np.cumsum(more)])
    drawn = drawn[drawn < work[-1]]
    step = np.searchsorted(work, drawn, side="right") - 1
    starts = np.array([s for s, _, _ in steps])
    rates = np.array([r for _, _, r in steps])
    return (starts[step] + (drawn - work[step]) / rates[step]).tolist()


def phase_edges(steps: Sequence[Step]) -> list[float]:
    """The phases' edges in seconds: every step's start, then the last one's end."""
    return [*(s for s, _, _ in steps), steps[-1][1]]
