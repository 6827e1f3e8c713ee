"""The tuner on a noisy objective: the best trial is chosen on its interval, and a deterministic
objective's configuration is never measured twice."""

from optuna.distributions import IntDistribution
from optuna.trial import create_trial

from specexp.sweep.tune import conservative, indistinguishable, measured_before

STEPS = {"drafter.num_steps": IntDistribution(1, 8)}


def trial(number: int, steps: int, value: float, half: float, deterministic: bool = False):
    t = create_trial(
        params={"drafter.num_steps": steps},
        distributions=STEPS,
        values=[value],
        user_attrs={"ci95": [half], "constraints": [], "deterministic": deterministic},
    )
    t.number = number
    return t


def test_the_lucky_measurement_is_not_declared_best() -> None:
    # the measured case: num_steps=4 once at 401.7 +- 160 (a lucky window), num_steps=3 at 380 +- 6
    lucky, steady = trial(0, 4, 401.7, 160.0), trial(1, 3, 380.0, 6.0)
    best = max([lucky, steady], key=lambda t: conservative(t, 0, "maximize"))
    assert best is steady
    assert indistinguishable(lucky, steady, 0)  # and the report names the other as a tie
    assert min([lucky, steady], key=lambda t: conservative(t, 0, "minimize")) is steady


def test_a_deterministic_configuration_is_found_again_and_a_noisy_one_is_not() -> None:
    trials = [trial(0, 4, 2.5, 0.0, deterministic=True), trial(1, 3, 380.0, 6.0)]
    assert measured_before(trials, {"drafter.num_steps": 4}) is trials[0]
    assert measured_before(trials, {"drafter.num_steps": 3}) is None  # noisy: measure again
    assert measured_before(trials, {"drafter.num_steps": 5}) is None
