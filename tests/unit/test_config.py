"""Every invalid combination fails at composition, named by key, with a fix."""

import pytest
from hydra.errors import ConfigCompositionException

from specexp.config import ConfigError


def test_default_composes(make_config) -> None:
    cfg = make_config()
    assert cfg.engine.name == "torch" and cfg.model.name == "tiny" and cfg.batch == 1
    assert cfg.drafter.speculative and cfg.drafter.draft_tokens == cfg.drafter.num_steps + 1


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["batch=0"], "batch"),
        (["drafter=none", "drafter.num_steps=3"], "drafter.num_steps"),
        (["drafter=tiny", "drafter.topk=2"], "drafter.topk"),  # the reference engine drafts a chain
        (
            ["drafter=tiny", "drafter.topk=2", "drafter.num_steps=2", "drafter.num_draft_tokens=9"],
            "drafter.num_draft_tokens",
        ),
        (["drafter=tiny_eagle3", "drafter.method=eagle"], "drafter.method"),  # reference engine: no EAGLE-1
        (["decode=0"], "decode"),
        (["+nccl.env.NCCL_IB_DISABLE=1", "+nccl.env.NCLL_TYPO=1"], "nccl.env.NCLL_TYPO"),
        (["+engine.env.NCCL_DEBUG=INFO"], "engine.env.NCCL_DEBUG"),
        (["workload=jsonl"], "workload.path"),
        (["engine.max_running_requests=2", "batch=4"], "engine.max_running_requests"),
        (["engine.port=70000"], "engine.port"),
        (["measure.windows=0"], "measure.windows"),
        (["measure.max_windows=2"], "measure.max_windows"),  # fewer than measure.windows (8)
        (["measure.rel_ci=1.5"], "measure.rel_ci"),
        (["measure.rel_ci=0.03", "measure.windows=1"], "measure.windows"),
        (["measure.max_s=0"], "measure.max_s"),
    ],
)
def test_invalid_combinations_name_their_key(make_config, overrides, key) -> None:
    with pytest.raises(ConfigError) as err:
        make_config(*overrides)
    assert err.value.key == key
    assert "Fix:" in str(err.value)


def test_drafter_for_another_model_is_refused(make_config) -> None:
    with pytest.raises(ConfigError, match="built for model 'tiny'"):
        make_config("drafter=tiny", "model.name=other")


def test_type_errors_fail_at_composition_naming_the_key(make_config) -> None:
    with pytest.raises(ConfigCompositionException, match="batch=many"):
        make_config("batch=many")


def test_capacity_is_the_sweeps_largest_batch(make_config, make_job) -> None:
    assert make_config("batch=2").capacity == 2
    cfg, run = make_job("batch=2", "++run.max_batch=16")
    assert run.capacity(cfg) == 16 and cfg.capacity == 2  # the sweep sizes the server; the config is the user's
    assert make_config("batch=2", "engine.max_running_requests=32").capacity == 32
