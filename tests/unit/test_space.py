"""The Optuna search space, parsed from Hydra sweep expressions, and its conditions."""

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from specexp.config import ConfigError
from specexp.sweep.space import SearchSpace, distribution, parse_condition, split_sweeps


def test_sweep_expressions_become_distributions() -> None:
    assert distribution("drafter.num_steps", "range(1,9)") == IntDistribution(1, 8, step=1)
    assert distribution("drafter.topk", "choice(1,2,4)") == CategoricalDistribution([1, 2, 4])
    assert distribution("x", "interval(0.1,1.0)") == FloatDistribution(0.1, 1.0)
    assert distribution("x", "tag(log,interval(1,64))") == FloatDistribution(1.0, 64.0, log=True)
    assert distribution("x", "tag(int,interval(1,64))") == IntDistribution(1, 64)
    assert distribution("batch", "4") == "4"  # a plain value stays a fixed override


def test_conditions_parse_into_clauses_that_all_must_hold() -> None:
    clauses = parse_condition("drafter.topk", "drafter.num_steps > 1 and drafter.num_steps <= 4")
    assert [(c.key, c.op, c.value) for c in clauses] == [
        ("drafter.num_steps", ">", 1.0),
        ("drafter.num_steps", "<=", 4.0),
    ]
    assert all(c.holds({"drafter.num_steps": 3}) for c in clauses)
    assert not all(c.holds({"drafter.num_steps": 1}) for c in clauses)
    assert not clauses[0].holds({})  # an unsuggested key never satisfies a condition


@pytest.mark.parametrize("text", ["num_steps >> 1", "drafter.num_steps > one", "a > 1 or b < 2"])
def test_unreadable_conditions_name_the_key(text: str) -> None:
    with pytest.raises(ConfigError, match=r"hydra.sweeper.conditions.drafter.topk"):
        parse_condition("drafter.topk", text)


def test_a_conditioned_parameter_is_only_suggested_when_its_condition_holds() -> None:
    space = SearchSpace.parse(
        {"drafter.num_steps": "range(1,3)", "drafter.topk": "choice(1,2)", "batch": "4"},
        {"drafter.topk": "drafter.num_steps > 1"},
    )
    assert space.fixed == {"batch": "4"}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = []
    for _ in range(8):
        trial = study.ask()
        values = space.suggest(trial)
        seen.append(values)
        study.tell(trial, 0.0)
    assert {v["drafter.num_steps"] for v in seen} == {1, 2}  # both branches of the condition were taken
    for values in seen:
        assert ("drafter.topk" in values) == (values["drafter.num_steps"] > 1)
    assert space.overrides({"drafter.num_steps": 2})[0] == "batch=4"


def test_conditions_on_parameters_outside_the_space_are_refused() -> None:
    with pytest.raises(ConfigError, match="not a searched parameter"):
        SearchSpace.parse({"drafter.num_steps": "range(1,3)"}, {"drafter.topk": "drafter.num_steps > 1"})


def test_grid_needs_discrete_values_and_command_line_sweeps_split_off() -> None:
    assert SearchSpace.parse({"a": "range(1,4)", "b": "choice(x,y)"}, {}).grid() == {"a": [1, 2, 3], "b": ["x", "y"]}
    with pytest.raises(ConfigError, match="a grid needs discrete values"):
        SearchSpace.parse({"a": "interval(0,1)"}, {}).grid()
    assert split_sweeps(["batch=4", "drafter.num_steps=range(1,9)"]) == (
        ["batch=4"],
        {"drafter.num_steps": "range(1,9)"},
    )


def test_a_chain_engine_searches_the_depth_only(make_config) -> None:
    """tune_depth's space on the reference engine (it drafts a chain): top-k and the draft tokens
    conditioned on it take no value the engine accepts, so they are dropped, not pruned trial by trial."""
    space = SearchSpace.parse(
        {
            "drafter.num_steps": "range(1, 9)",
            "drafter.topk": "choice(1, 2, 4)",
            "drafter.num_draft_tokens": "range(2, 17)",
        },
        {"drafter.topk": "drafter.num_steps > 1", "drafter.num_draft_tokens": "drafter.topk > 1"},
    )

    def accepts(values: dict) -> bool:
        try:
            make_config("drafter=tiny", *space.overrides(values))
        except ConfigError:
            return False
        return True

    refused = space.refused(accepts)
    assert refused == ["drafter.topk", "drafter.num_draft_tokens"]
    assert list(space.without(["drafter.topk"]).distributions) == ["drafter.num_steps"]  # and what hangs on it
    assert space.without(["drafter.topk"]).conditions == {}
