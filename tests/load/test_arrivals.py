"""Open-loop arrival schedules: the seeded generator offers exactly the asked rate over the window,
and burstiness shapes the gaps as a gamma distribution."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from specexp.load.arrivals import arrival_times


@pytest.mark.parametrize("n", [2, 8, 2000])
@pytest.mark.parametrize("rate", [0.5, 4.0, 50.0])
@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_the_window_offers_exactly_the_rate(n: int, rate: float, burstiness: float) -> None:
    times = arrival_times(n, rate, burstiness, (0, 0))
    assert len(times) == n and times[0] == 0.0 and all(b >= a for a, b in itertools.pairwise(times))
    assert (n - 1) / times[-1] == pytest.approx(rate)


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rate_over_any_stretch_within_the_statistical_bound(burstiness: float, seed: int) -> None:
    # the first half of a long schedule is an ordinary sample: m gamma gaps of shape k sum to
    # Gamma(m k, 1/(k rate)), relative sd 1/sqrt(m k), and the whole is pinned to the rate
    rate, n = 4.0, 4001
    times = arrival_times(n, rate, burstiness, (seed, 0))
    m = (n - 1) // 2
    measured = m / times[m]
    assert abs(measured / rate - 1) < 4 / math.sqrt(m * burstiness), measured  # four standard deviations


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gaps_follow_the_gamma_of_that_burstiness(burstiness: float) -> None:
    rate = 3.0
    gaps = np.diff(arrival_times(3000, rate, burstiness, (7, 0)))
    fitted = stats.kstest(gaps, stats.gamma(burstiness, scale=1 / (burstiness * rate)).cdf)
    assert fitted.pvalue > 1e-3, fitted
    other = 4.0 if burstiness != 4.0 else 1.0  # and not the gamma of another burstiness
    assert stats.kstest(gaps, stats.gamma(other, scale=1 / (other * rate)).cdf).pvalue < 1e-6
    # coefficient of variation 1/sqrt(k): 1 for Poisson, larger when burstier
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1 / math.sqrt(burstiness), rel=0.1)


def test_same_seed_same_schedule_and_rates_only_rescale_it() -> None:
    a = arrival_times(50, 2.0, 1.0, (0, 0))
    assert a == arrival_times(50, 2.0, 1.0, (0, 0))
    assert a != arrival_times(50, 2.0, 1.0, (0, 1))  # another repeat: other draws
    assert arrival_times(50, 8.0, 1.0, (0, 0)) == pytest.approx([t / 4 for t in a])
    assert arrival_times(0, 2.0, 1.0, (0, 0)) == [] and arrival_times(1, 2.0, 1.0, (0, 0)) == [0.0]
