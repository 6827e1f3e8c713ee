"""A rate that changes in steps (load.profile): each step offers its rate as the arrival process would
(counts within scipy's bounds), the same seed gives the same times (every arm replays them), and a
malformed profile is one line naming the key and the fix."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from specexp.config import ConfigError, LoadConfig
from specexp.load.rate_profile import phase_edges, profile_arrivals
from specexp.load.send_plan import arrivals

STEPS = [(0.0, 20.0, 2.0), (20.0, 30.0, 15.0), (30.0, 60.0, 0.5)]


def _counts(times: list[float]) -> np.ndarray:
    return np.histogram(times, bins=phase_edges(STEPS))[0]


@pytest.mark.parametrize("burstiness", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_each_step_offers_exactly_its_rate(burstiness: float, seed: int) -> None:
    counts = _counts(profile_arrivals(STEPS, burstiness, (seed, 0)))
    assert counts.tolist() == [round((end - start) * rate) for start, end, rate in STEPS]


def test_poisson_arrivals_are_uniform_within_their_step() -> None:
    # shape 1: a Poisson process given its count puts the arrivals uniformly over the step; the
    # positions of 200 seeded schedules' arrivals within the peak pass scipy's Kolmogorov-Smirnov test
    start, end, _ = STEPS[1]
    peak = [t for seed in range(200) for t in profile_arrivals(STEPS, 1.0, (seed, 1)) if start <= t < end]
    assert stats.kstest(peak, stats.uniform(start, end - start).cdf).pvalue > 1e-3


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_burstiness_shapes_the_gaps_as_load_rate_does(burstiness: float) -> None:
    # the gaps' squared coefficient of variation is 1 / shape (gamma), as for a constant rate
    gaps = np.concatenate([np.diff(profile_arrivals(STEPS[:1], burstiness, (seed,))) for seed in range(100)])
    cv2 = gaps.var() / gaps.mean() ** 2
    assert abs(np.log(cv2 * burstiness)) < 0.3, cv2


def test_same_seed_same_times_and_all_inside_the_profile() -> None:
    first = profile_arrivals(STEPS, 1.0, (0, 0, 0))
    assert first == profile_arrivals(STEPS, 1.0, (0, 0, 0))
    assert first != profile_arrivals(STEPS, 1.0, (0, 0, 1))
    assert all(b >= a for a, b in itertools.pairwise(first)) and first[0] >= 0 and first[-1] < 60.0


def test_the_load_schedules_a_profile_and_its_phases() -> None:
    load = LoadConfig(kind="rate", profile=[[0, 2], [20, 15], [30, 0.5]], duration_s=60)
    assert load.rate == 15.0  # the peak sizes the warm-up
    assert load.steps() == STEPS
    assert arrivals(load, 0, (0, 0)) == profile_arrivals(STEPS, 1.0, (0, 0))
    assert LoadConfig(**{**vars(load)}).rate == 15.0  # a config read back (rate set) is the same


@pytest.mark.parametrize(
    ("settings", "key", "said"),
    [
        ({"profile": [[1, 2]], "duration_s": 5}, "load.profile", "do not increase from 0"),
        ({"profile": [[0, 2], [3, 4], [3, 5]], "duration_s": 5}, "load.profile", "do not increase from 0"),
        ({"profile": [[0, 2], [3, 0]], "duration_s": 5}, "load.profile", "not > 0"),
        ({"profile": [[0, 2, 3]], "duration_s": 5}, "load.profile", "pairs"),
        ({"profile": [[0, 2], [3, 4]], "duration_s": 3}, "load.duration_s", "does not end the last step"),
        ({"profile": [[0, 2]], "duration_s": 5, "rate": 3.0}, "load.rate", "sets the rate"),
        ({"profile": [[0, 2]], "duration_s": 5, "kind": "closed", "rate": None}, "load.profile", "closed loop"),
    ],
)
def test_a_malformed_profile_is_one_line(settings: dict, key: str, said: str) -> None:
    with pytest.raises(ConfigError) as raised:
        LoadConfig(**{"kind": "rate", **settings})
    assert raised.value.key == key and said in str(raised.value) and "\n" not in str(raised.value)
    assert "Fix:" in str(raised.value)
