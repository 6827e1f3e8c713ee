"""The study's search rules on a synthetic objective, in process: the tuner's samplers, its
constraint, its deterministic repeats, its infeasible and failed trials and its resumable storage,
driven as specexp.sweep.tune drives them, with a curve of depth in place of a live server (as
hydra-optuna-sweeper tests its search space). One live study is in tests/e2e/test_tune.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from specexp.report.study import arms, best_arm, feasible
from specexp.result import PointResult
from specexp.sweep.space import SearchSpace, parse_condition
from specexp.sweep.trials import (
    MAX_ASKS_PER_TRIAL,
    as_before,
    enough,
    make_sampler,
    measured_before,
    outcome,
    storage_for,
    tell,
)

DEPTH = "drafter.num_steps"
CONSTRAINTS = parse_condition("constraints", "accept_rate >= 0.5")
Measure = Callable[[dict[str, Any]], PointResult]


def accept_rate(depth: int) -> float:
    return 0.9 - 0.08 * depth


def greedy(values: dict[str, Any]) -> PointResult:
    """A deterministic objective (greedy decoding of the same prompts: windows agree exactly):
    accept_length grows with depth up to 6, while accept_rate falls below 0.5 past depth 5, so the
    constraint moves the best depth from 6 to 5."""
    depth = int(values[DEPTH])
    metrics = {
        "accept_length": 1 + depth * accept_rate(depth),
        "accept_length_ci95": 0.0,
        "accept_rate": accept_rate(depth),
        "windows": 3,
    }
    return PointResult("ok", "torch", "tiny", "tiny", 1, params={**values, "batch": 1}, metrics=metrics)


def noisy(values: dict[str, Any]) -> PointResult:
    """The same curve measured with noise (a throughput): a configuration is measured every time."""
    row = greedy(values)
    row.metrics["accept_length_ci95"] = 0.1
    return row


def run_study(
    study: optuna.Study,
    space: SearchSpace,
    n_trials: int,
    measure: Measure = greedy,
    refuse: Callable[[dict[str, Any]], str | None] = lambda values: None,
) -> list[PointResult]:
    """Tuner._trial's rules in its order: a configuration measured before (deterministic) is told its
    earlier values, one the engine refuses is pruned as infeasible, the rest are measured and told
    ``outcome``; until ``enough`` trials or the sampler has tried every point. The points measured,
    tagged as the tuner tags them."""
    rows: list[PointResult] = []
    going = True
    while going and not enough(study.get_trials(deepcopy=False), n_trials, time.time()):
        trial = study.ask()
        values = space.suggest(trial)
        earlier = measured_before(study.get_trials(deepcopy=False), trial.params)
        if earlier is not None:
            told = as_before(earlier)
        elif reason := refuse(values):
            trial.set_user_attr("infeasible", reason)
            going = tell(study, trial, state=TrialState.PRUNED)
            continue
        else:
            row = measure(values)
            rows.append(row)
            told = outcome([row], ["accept_length"], CONSTRAINTS)
        for key, value in told.attrs.items():
            trial.set_user_attr(key, value)
        if told.values is None:
            going = tell(study, trial, state=TrialState.FAIL)
        else:
            going = tell(study, trial, values=told.values)
        if earlier is None:
            frozen = study.get_trials(deepcopy=False)[trial.number]
            rows[-1].tags |= {"optuna.trial": str(trial.number), "optuna.feasible": str(feasible(frozen)).lower()}
    return rows


def depth_study(
    sampler: str, name: str = "s", storage: Any = None, seed: int | None = 0, space: SearchSpace | None = None
) -> optuna.Study:
    space = space or depth_space()
    return optuna.create_study(
        storage=storage,
        study_name=name,
        direction="maximize",
        sampler=make_sampler(sampler, seed, space, constrained=True),
        load_if_exists=True,
    )


def depth_space(text: str = "range(1,9)") -> SearchSpace:
    return SearchSpace.parse({DEPTH: text}, {})


def best_depth(rows: list[PointResult]) -> tuple[str, float]:
    """The study's answer as best.csv reads it: the best feasible arm on its interval."""
    (candidates,) = arms(rows, [DEPTH], "accept_length").values()
    best, _ = best_arm(candidates, maximize=True)
    return dict(best.settings)[DEPTH], best.estimate.value


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tpe_in_12_trials_finds_the_grids_best_depth_measuring_each_once(seed: int) -> None:
    grid = depth_study("grid", seed=seed)
    grid_rows = run_study(grid, depth_space(), 8)
    assert sorted(int(r.params[DEPTH]) for r in grid_rows) == list(range(1, 9))  # the grid covers the space
    grid_best = best_depth(grid_rows)
    assert grid_best[0] == "5"  # the constraint bites: 6 measures higher, past accept_rate 0.5, and 5 is no corner

    tpe = depth_study("tpe", seed=seed)
    rows = run_study(tpe, depth_space(), 12)
    trials = tpe.get_trials(deepcopy=False)
    assert len(trials) == 12 and best_depth(rows) == grid_best
    # a deterministic objective: each configuration measured once, however often TPE suggests it
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(rows) == len({t.params[DEPTH] for t in complete}) < len(trials)
    assert all(t.user_attrs["ci95"] == [0.0] for t in complete)
    repeats = [t for t in complete if "same_as" in t.user_attrs]
    assert repeats and all(t.values == trials[t.user_attrs["same_as"]].values for t in repeats)
    assert not feasible(next(t for t in complete if t.params[DEPTH] == 6))  # past the constraint


def test_infeasible_configurations_are_pruned_never_measured_and_never_count_as_trials() -> None:
    space = SearchSpace.parse({"drafter.topk": "choice(2,4)"}, {})
    study = optuna.create_study(sampler=make_sampler("grid", 0, space, constrained=False))
    rows = run_study(study, space, 1, refuse=lambda v: f"drafter.topk: {v['drafter.topk']} on a chain engine")
    trials = study.get_trials(deepcopy=False)
    assert rows == [] and [t.state for t in trials] == [TrialState.PRUNED] * 2  # the grid ends: nothing left
    assert [feasible(t) for t in trials] == [False, False]
    assert "drafter.topk: 2 on a chain engine" in {t.user_attrs["infeasible"] for t in trials}
    # a space the engine refuses throughout: the random sampler asks until the cap, measuring nothing
    study = optuna.create_study(sampler=make_sampler("random", 0, space, constrained=False))
    assert run_study(study, space, 2, refuse=lambda v: "refused") == []
    assert len(study.trials) == MAX_ASKS_PER_TRIAL * 2


def test_a_failed_trial_is_recorded_and_the_study_goes_on() -> None:
    def breaks_at_3(values: dict[str, Any]) -> PointResult:
        if values[DEPTH] == 3:
            return PointResult("failed", "torch", "tiny", "tiny", 1, params=values, error="server exited: log tail")
        return greedy(values)

    space = depth_space("range(2,5)")
    study = depth_study("grid", space=space)
    rows = run_study(study, space, 3, measure=breaks_at_3)
    by_depth = {t.params[DEPTH]: t for t in study.trials}
    assert sorted(t.state.name for t in study.trials) == ["COMPLETE", "COMPLETE", "FAIL"]
    assert by_depth[3].user_attrs["error"] == "server exited: log tail"
    assert best_depth(rows)[0] == "4"  # the failed point is no arm: the study answers from the others
    missing = outcome([PointResult("ok", "torch", "tiny", "tiny", 1, metrics={"windows": 3})], ["accept_length"], [])
    assert missing.values is None and missing.attrs == {"error": "objective missing"}


def test_a_study_resumes_from_its_storage_and_n_trials_is_the_studys_total(tmp_path) -> None:
    url = f"journal://{tmp_path / 'deep' / 'study.log'}"
    first = run_study(depth_study("random", "resume", storage_for(url)), depth_space(), 2, measure=noisy)
    again = run_study(depth_study("random", "resume", storage_for(url)), depth_space(), 3, measure=noisy)
    assert len(first) == 2 and len(again) == 1  # the rerun measured only the trial it lacked
    backend = JournalFileBackend(str(tmp_path / "deep" / "study.log"))
    loaded = optuna.load_study(study_name="resume", storage=JournalStorage(backend))
    assert [t.state for t in loaded.trials] == [TrialState.COMPLETE] * 3
    assert storage_for(f"sqlite:///{tmp_path / 'a' / 'b.db'}").endswith("b.db") and (tmp_path / "a").is_dir()


def test_one_objective_per_batch_and_constraints_over_every_batch() -> None:
    rows = [greedy({DEPTH: 2}), greedy({DEPTH: 6})]  # a trial measured at two batches, one launch
    told = outcome(rows, ["accept_length", "accept_length"], CONSTRAINTS)
    assert told.values == [rows[0].metrics["accept_length"], rows[1].metrics["accept_length"]]
    assert told.attrs["deterministic"] and told.attrs["ci95"] == [0.0, 0.0]
    assert [v > 0 for v in told.attrs["constraints"]] == [False, True]  # depth 6 is past accept_rate 0.5
    assert not outcome([noisy({DEPTH: 2})], ["accept_length"], []).attrs["deterministic"]  # measured again


def test_optuna_is_the_major_version_the_tuner_is_written_for() -> None:
    assert optuna.__version__.startswith("5")
