"""Planning a sweep: jobs grouped by server key in order of first appearance, sized to their server."""

import pytest

from specexp.config import ConfigError
from specexp.sweep.groups import form_groups
from specexp.sweep.job_plan import by_server, plan


def test_jobs_are_grouped_by_server_whatever_the_override_order(make_config) -> None:
    # Hydra varies the last override fastest: batch=1,4 drafter=none,tiny alternates drafters.
    jobs = [["dry_run=true", f"batch={b}", f"drafter={d}", "arms=sequential"] for b in (1, 4) for d in ("none", "tiny")]
    planned = [j.overrides for j in plan(lambda o: make_config(*o), jobs, "s1")]
    drafters = [next(o for o in p if o.startswith("drafter=")) for p in planned]
    assert drafters == ["drafter=none", "drafter=none", "drafter=tiny", "drafter=tiny"]
    assert [p[1] for p in planned] == ["batch=1", "batch=4", "batch=1", "batch=4"]  # command-line order kept
    assert all(p[-2:] == ["++run.sweep_id='s1'", "++run.max_batch=4"] for p in planned)
    names = [p[-3] for p in planned]  # each run named by what varies, batch last (arms fixed: not named)
    assert names[0] == "++run.run_name='drafter=none batch=1'" and names[-1] == "++run.run_name='drafter=tiny batch=4'"


def test_each_server_is_sized_to_its_own_largest_batch(make_config) -> None:
    jobs = [["dry_run=true", "drafter=none", "batch=2"], ["dry_run=true", "drafter=tiny", "batch=8"]]
    planned = [j.overrides for j in plan(lambda o: make_config(*o), jobs, "s2")]
    assert [p[-1] for p in planned] == ["++run.max_batch=2", "++run.max_batch=8"]


def test_jobs_differing_only_in_batch_share_one_server(make_config) -> None:
    jobs = [["dry_run=true", "drafter=tiny", f"batch={b}"] for b in (1, 2, 16)]
    planned = [j.overrides for j in plan(lambda o: make_config(*o), jobs, "s3")]
    assert [p[1] for p in planned] == ["drafter=tiny"] * 3 and {p[-1] for p in planned} == {"++run.max_batch=16"}


def test_repeats_interleave_the_servers_in_rounds(make_config) -> None:
    jobs = [
        ["dry_run=true", "repeats=3", f"drafter={d}", f"batch={b}", "arms=sequential"]
        for d in ("none", "tiny")
        for b in (1, 4)
    ]
    planned = [j.overrides for j in plan(lambda o: make_config(*o), jobs, "s4")]
    order = [(p[2], p[3], next((o for o in p if o.startswith("++run.repeat=")), "++run.repeat=0")) for p in planned]
    rounds = [[o for o in order if o[2] == f"++run.repeat={r}"] for r in range(3)]
    assert order == rounds[0] + rounds[1] + rounds[2]  # A B, A B, A B: drift hits both arms
    assert all([d for d, _, _ in r] == ["drafter=none"] * 2 + ["drafter=tiny"] * 2 for r in rounds)


def test_each_server_launch_is_one_group_in_plan_order(make_config) -> None:
    jobs = [["dry_run=true", f"batch={b}", f"drafter={d}", "arms=sequential"] for b in (1, 4) for d in ("none", "tiny")]
    groups = by_server(plan(lambda o: make_config(*o), jobs, "s5"))
    assert [[j.cfg.drafter.name for j in g] for g in groups] == [["none", "none"], ["tiny", "tiny"]]
    assert [[j.cfg.batch for j in g] for g in groups] == [[1, 4], [1, 4]]
    repeated = [["dry_run=true", "repeats=2", "drafter=none", f"batch={b}"] for b in (1, 4)]
    rounds = by_server(plan(lambda o: make_config(*o), repeated, "s6"))
    assert [len(g) for g in rounds] == [2, 2]  # each round a fresh launch: a group of its own


def test_arms_on_cpu_take_turns_at_each_load_in_one_group_with_both_servers(make_config) -> None:
    jobs = [["dry_run=true", f"drafter={d}", f"batch={b}"] for d in ("none", "tiny") for b in (1, 4, 8)]
    (group,) = by_server(plan(lambda o: make_config(*o), jobs, "s7"))  # arms=auto: no GPU, no fixed port
    assert [(j.cfg.drafter.name, j.cfg.batch) for j in group] == [
        ("none", 1),
        ("tiny", 1),
        ("none", 4),
        ("tiny", 4),
        ("none", 8),
        ("tiny", 8),
    ]
    assert len({j.group for j in group}) == 2  # two server launches, one launcher job
    assert form_groups(group, first_point=0, first_group=0)[0].servers == 2


def test_repeated_arms_take_turns_within_each_round(make_config) -> None:
    jobs = [["dry_run=true", "repeats=2", f"drafter={d}", f"batch={b}"] for d in ("none", "tiny") for b in (1, 4)]
    rounds = by_server(plan(lambda o: make_config(*o), jobs, "s8"))
    assert [[(j.cfg.drafter.name, j.cfg.batch, int("++run.repeat=1" in j.overrides)) for j in g] for g in rounds] == [
        [("none", 1, 0), ("tiny", 1, 0), ("none", 4, 0), ("tiny", 4, 0)],
        [("none", 1, 1), ("tiny", 1, 1), ("none", 4, 1), ("tiny", 4, 1)],
    ]


def test_arms_stay_sequential_where_servers_cannot_share_the_machine(make_config) -> None:
    fixed = [["dry_run=true", f"drafter={d}", "engine.port=18123"] for d in ("none", "tiny")]
    assert len(by_server(plan(lambda o: make_config(*o), fixed, "s9"))) == 2  # one port: one server at a time
    gpus = [["dry_run=true", f"drafter={d}", "engine.gpus=1"] for d in ("none", "tiny")]
    assert len(by_server(plan(lambda o: make_config(*o), gpus, "s10"))) == 2  # GPU servers: arms=alternate asks
    arms = [["dry_run=true", f"drafter={d}"] for d in ("none", "tiny")]
    assert len(by_server(plan(lambda o: make_config(*o), arms, "s13", side_by_side=True))) == 2  # submitit
    many = [["dry_run=true", "drafter=tiny", f"drafter.num_steps={k}"] for k in range(1, 6)]
    assert len(by_server(plan(lambda o: make_config(*o), many, "s12"))) == 5  # 5 models in memory: asked for
    forced = [["dry_run=true", f"drafter={d}", "engine.gpus=1", "arms=alternate"] for d in ("none", "tiny")]
    assert len(by_server(plan(lambda o: make_config(*o), forced, "s11"))) == 1


def test_alternating_arms_refuse_a_fixed_port(make_config) -> None:
    with pytest.raises(ConfigError, match="arms: alternating arms run their servers at once"):
        make_config("arms=alternate", "engine.port=18123")
    with pytest.raises(ConfigError, match="arms: unknown value 'interleave'"):
        make_config("arms=interleave")
