"""load=closed|rate and slo: bad combinations fail at composition, and the server is sized from the
sweep's largest concurrency cap or a configured limit."""

from __future__ import annotations

import pytest

from specexp.config import ConfigError
from specexp.sweep.job_plan import plan

RATE = ["load=rate", "rate=4", "load.max_concurrency=8"]


def test_closed_loop_is_the_default_and_rate_is_an_open_loop(make_config) -> None:
    cfg = make_config()
    assert cfg.load.kind == "closed" and cfg.concurrency == cfg.batch == cfg.streams == 1
    cfg = make_config(*RATE)
    assert (cfg.load.kind, cfg.load.rate, cfg.load.burstiness) == ("rate", 4.0, 1.0)
    assert cfg.concurrency == 8 and cfg.capacity == 8 and cfg.streams == 4
    assert cfg.workload.measured(cfg.streams) == 8  # twice the rate rounded up
    assert make_config("load=rate", "load.rate=2.5", "load.max_concurrency=2").streams == 2  # within the cap
    assert make_config("load=rate", "rate=100", "engine.max_running_requests=3").streams == 3  # or the server's


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["load=rate"], "load.rate"),
        (["load=rate", "rate=0", "load.max_concurrency=2"], "load.rate"),
        (["rate=4"], "rate"),  # a closed loop has no rate
        (["load.rate=4"], "load.rate"),
        ([*RATE, "batch=4"], "batch"),
        ([*RATE, "load.burstiness=0"], "load.burstiness"),
        ([*RATE, "load.max_concurrency=0"], "load.max_concurrency"),
        (["load=rate", "rate=4"], "load.max_concurrency"),  # nothing says how large the server must be
        ([*RATE, "engine.max_running_requests=4"], "engine.max_running_requests"),  # below the cap
        (["load=burst"], None),
        (["slo.ttft_ms=0"], "slo.ttft_ms"),
        (["slo.tpot_ms=-1"], "slo.tpot_ms"),
        (["slo.target=0"], "slo.target"),
    ],
)
def test_invalid_loads_and_slos_name_their_key(make_config, overrides, key) -> None:
    if key is None:  # an unknown group option: Hydra's own error
        with pytest.raises(Exception, match="load"):
            make_config(*overrides)
        return
    with pytest.raises(ConfigError) as err:
        make_config(*overrides)
    assert err.value.key == key and "Fix:" in str(err.value)


def test_an_uncapped_open_loop_runs_on_a_configured_limit(make_config) -> None:
    cfg = make_config("load=rate", "rate=4", "engine.max_running_requests=32")
    assert cfg.concurrency is None and cfg.capacity == 32 and cfg.capacity_source == "engine.max_running_requests"


def test_an_external_endpoint_needs_no_limit(make_config) -> None:
    cfg = make_config("engine=external", "engine.url=http://127.0.0.1:9", "load=rate", "rate=4")
    assert cfg.concurrency is None


def test_a_rate_sweep_sizes_each_server_to_its_largest_cap(make_config, make_job) -> None:
    jobs = [
        ["dry_run=true", "load=rate", f"rate={r}", f"load.max_concurrency={c}", f"drafter={d}"]
        for d in ("none", "tiny")
        for r, c in ((1, 2), (8, 16))
    ]
    planned = [j.overrides for j in plan(lambda o: make_config(*o), jobs, "s")]
    assert [p[-1] for p in planned] == ["++run.max_batch=16"] * 4  # two servers, each for caps 2 and 16
    cfg, run = make_job(*planned[0])
    assert run.capacity(cfg) == 16
    assert run.capacity_source(cfg) == "the largest load.max_concurrency of this server's jobs"


def test_an_uncapped_rate_sweep_keeps_the_configured_limit(make_config) -> None:
    jobs = [["dry_run=true", "load=rate", f"rate={r}", "engine.max_running_requests=24"] for r in (1, 2)]
    planned = [j.overrides for j in plan(lambda o: make_config(*o), jobs, "s")]
    assert [p[-1] for p in planned] == ["++run.sweep_id='s'"] * 2  # no max_batch: nothing to size from
    assert {make_config(*p).capacity for p in planned} == {24}
