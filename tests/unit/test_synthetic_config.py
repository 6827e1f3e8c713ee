"""drafter.synthetic_acceptance_*: vLLM 0.32's definitions and checks (SpeculativeConfig), refused in one
line naming the key where an engine cannot accept that way, all before any server starts."""

from __future__ import annotations

import pytest

from specexp.config import ConfigError
from specexp.config.engine import synthetic_rates

SYNTHETIC = ("drafter=tiny", "drafter.num_steps=4")


@pytest.mark.parametrize(
    ("length", "rates"),
    [
        (1.0, [0.0, 0.0, 0.0, 0.0]),
        (2.5, [1.0, 0.5, 0.0, 0.0]),  # vLLM's minimum-variance schedule
        (4.25, [1.0, 1.0, 1.0, 0.25]),
        (5.0, [1.0, 1.0, 1.0, 1.0]),
    ],
)
def test_a_length_becomes_vllms_rates(length: float, rates: list[float]):
    assert synthetic_rates(4, None, length) == rates
    assert 1 + sum(rates) == length


@pytest.mark.parametrize(
    ("override", "key", "says"),
    [
        ("drafter.synthetic_acceptance_length=5.5", "drafter.synthetic_acceptance_length", r"outside \[1, 5\]"),
        ("drafter.synthetic_acceptance_length=0.5", "drafter.synthetic_acceptance_length", r"outside \[1, 5\]"),
        ("drafter.synthetic_acceptance_rates=[0.5,0.6,0.1,0]", "drafter.synthetic_acceptance_rates", "rises"),
        ("drafter.synthetic_acceptance_rates=[0.9,0.5]", "drafter.synthetic_acceptance_rates", "2 entries"),
        ("drafter.synthetic_acceptance_rates=[1.2,1,1,1]", "drafter.synthetic_acceptance_rates", r"\[0, 1\]"),
    ],
)
def test_bad_values_are_refused_naming_the_key(make_config, override: str, key: str, says: str):
    with pytest.raises(ConfigError, match=says) as err:
        make_config("engine=torch", *SYNTHETIC, override)
    assert err.value.key == key and "\n" not in str(err.value)


def test_length_and_rates_are_mutually_exclusive(make_config):
    with pytest.raises(ConfigError, match="one of the two") as err:
        make_config(*SYNTHETIC, "drafter.synthetic_acceptance_length=2", "drafter.synthetic_acceptance_rates=[1,0,0,0]")
    assert err.value.key == "drafter.synthetic_acceptance_rates"


def test_no_drafter_no_synthetic_acceptance(make_config):
    with pytest.raises(ConfigError, match="does not speculate") as err:
        make_config("drafter=none", "drafter.synthetic_acceptance_length=2")
    assert err.value.key == "drafter.synthetic_acceptance_length"


@pytest.mark.parametrize(
    ("engine", "says"),
    [
        (("engine=sglang",), "SGLang has no such server argument"),
        (("engine=external", "engine.url=http://127.0.0.1:9"), "does not launch this server"),
    ],
)
def test_engines_that_cannot_are_refused(make_config, engine: tuple[str, ...], says: str):
    with pytest.raises(ConfigError, match=says) as err:
        make_config(*engine, *SYNTHETIC, "drafter.synthetic_acceptance_rates=[0.9,0.8,0.5,0.1]")
    assert err.value.key == "drafter.synthetic_acceptance_rates"


def test_a_good_setting_composes(make_config):
    cfg = make_config("engine=torch", *SYNTHETIC, "drafter.synthetic_acceptance_length=2.5")
    assert cfg.drafter.synthetic and cfg.drafter.synthetic_rates == [1.0, 0.5, 0.0, 0.0]
    assert cfg.drafter.synthetic_acceptance_length == 2.5  # kept as given: the map's axis
    plain = make_config("engine=torch", *SYNTHETIC)
    assert not plain.drafter.synthetic
