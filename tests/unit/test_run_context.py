"""The user's config holds only what a user sets: what a sweep decides for a job travels in a frozen
RunContext beside it (specexp.context), and nothing rebuilds or changes a config after validation."""

import copy
import dataclasses

import pytest
from omegaconf import OmegaConf

from specexp.config import ConfigError
from specexp.context import RUN_NODE, SWEEP_DECIDES, Launch, RunContext
from specexp.engines.torch import TorchEngine
from specexp.point.plan import flat_params
from specexp.sweep.job_plan import plan


def schema_keys(node: object, prefix: str = "") -> set[str]:
    """Every dotted key a validated config's dataclass tree declares, its groups' fields included."""
    keys = set()
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        keys.add(prefix + f.name)
        value = getattr(node, f.name)
        if dataclasses.is_dataclass(value):
            keys |= schema_keys(value, f"{prefix}{f.name}.")
    return keys


def test_the_sweeper_writes_no_key_of_the_users_schema(make_config) -> None:
    jobs = [["dry_run=true", "repeats=2", f"drafter={d}"] for d in ("none", "tiny")]
    planned = plan(lambda o: make_config(*o), jobs, "s1")
    added = {o for j in planned for o in j.overrides} - {o for job in jobs for o in job}
    written = {o.partition("=")[0] for o in added}
    assert written == {f"++{RUN_NODE}.{k}" for k in SWEEP_DECIDES}  # sweep id, run name, round, capacity
    user = schema_keys(make_config())
    assert "workload.length_tokenizer" in user and "engine.max_running_requests" in user  # the walk reaches groups
    assert not {k.lstrip("+") for k in written} & user and not set(SWEEP_DECIDES) & user


def test_a_job_reads_its_sweeps_decisions_once_into_a_frozen_context(make_job) -> None:
    cfg, run = make_job("batch=2", "repeats=2", "++run.sweep_id='s1'", "++run.run_name='drafter=tiny batch=2'")
    assert run == RunContext(sweep_id="s1", run_name="drafter=tiny batch=2")
    cfg, run = make_job("batch=2", "repeats=3", "++run.repeat=2", "++run.max_batch=16")
    assert (run.repeat, run.max_batch, run.capacity(cfg), cfg.capacity) == (2, 16, 16, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.max_batch = 4  # type: ignore[misc]


def test_a_points_params_keep_the_sweeps_decisions_by_their_own_names() -> None:
    raw = OmegaConf.create({"batch": 4, RUN_NODE: {"sweep_id": "s", "repeat": 1, "max_batch": 8}})
    assert flat_params(raw) == {"batch": 4, "sweep_id": "s", "run_name": None, "repeat": 1, "max_batch": 8}
    assert flat_params(OmegaConf.create({"batch": 1})) == {  # a single run: the defaults, as before
        "batch": 1,
        "sweep_id": None,
        "run_name": None,
        "repeat": 0,
        "max_batch": None,
    }


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["batch=8", "++run.max_batch=4"], "run.max_batch"),
        (["load=rate", "rate=4", "load.max_concurrency=8", "++run.max_batch=4"], "run.max_batch"),
        (["engine.max_running_requests=8", "++run.max_batch=16"], "engine.max_running_requests"),
        (["++run.repeat=2"], "run.repeat"),
        (["++run.colour=1"], "run.colour"),
    ],
)
def test_a_decision_that_does_not_fit_the_config_names_its_key(make_job, overrides, key) -> None:
    with pytest.raises(ConfigError) as err:
        make_job(*overrides)
    assert err.value.key == key and "Fix:" in str(err.value)


def test_validation_leaves_the_config_as_composed(make_job) -> None:
    cfg, run = make_job("workload=builtin", "workload.length_bucket=0-64")
    assert cfg.workload.length_tokenizer is None  # the user's setting, not filled in by the program
    assert run.length_tokenizer == (cfg.model.tokenizer or cfg.model.path)  # the served model's tokens count
    _, own = make_job("workload=builtin", "workload.length_bucket=0-64", "workload.length_tokenizer=/tok")
    assert own.length_tokenizer == "/tok"


def test_a_launch_is_sized_and_named_beside_the_config(make_config) -> None:
    cfg = make_config("batch=2")
    before = copy.deepcopy(cfg)
    argv = TorchEngine().command(cfg, 8000, Launch.of(cfg, RunContext(max_batch=16), "tiny@abc")).argv
    assert argv[argv.index("--max-running-requests") + 1] == "16"
    assert argv[argv.index("--served-model-name") + 1] == "tiny@abc"
    assert cfg == before and cfg.model.served_name is None
    plain = TorchEngine().command(cfg, 8000).argv  # a plan's: the config's own size and name
    assert plain[plain.index("--max-running-requests") + 1] == "2"
    assert plain[plain.index("--served-model-name") + 1] == cfg.model.api_name
