"""Optuna's side of a tuning sweep: the study's storage, the sampler by name, the constraints a trial
must meet (Optuna's convention: feasible when every value is <= 0), its half-width, and whether a
configuration was measured before with a deterministic objective (specexp.sweep.tune)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from specexp.config import ConfigError
from specexp.result import PointResult
from specexp.sweep import claims
from specexp.sweep.space import Clause, SearchSpace

MAX_ASKS_PER_TRIAL = 10
SAMPLERS = ("tpe", "random", "grid", "bruteforce", "nsga2", "cmaes", "qmc", "gp")


def storage_for(url: str) -> str | JournalStorage:
    if url.startswith("journal://"):
        path = Path(url.removeprefix("journal://"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return url


def make_sampler(name: str, seed: int | None, space: SearchSpace, constrained: bool) -> optuna.samplers.BaseSampler:
    constraints = constraint_values if constrained else None
    match name:
        case "tpe":
            return optuna.samplers.TPESampler(seed=seed, constraints_func=constraints, n_startup_trials=4)
        case "random":
            return optuna.samplers.RandomSampler(seed=seed)
        case "grid":
            return optuna.samplers.GridSampler(space.grid(), seed=seed)
        case "bruteforce":
            return optuna.samplers.BruteForceSampler(seed=seed)
        case "nsga2":
            return optuna.samplers.NSGAIISampler(seed=seed, constraints_func=constraints)
        case "cmaes":
            return optuna.samplers.CmaEsSampler(seed=seed)
        case "qmc":
            return optuna.samplers.QMCSampler(seed=seed)
        case "gp":
            return optuna.samplers.GPSampler(seed=seed, constraints_func=constraints)
    raise ConfigError("hydra.sweeper.sampler", f"unknown sampler {name!r}", f"use one of {SAMPLERS}")


def constraint_values(trial: optuna.trial.FrozenTrial) -> list[float]:
    """Optuna's convention: a trial is feasible when every value is <= 0."""
    return trial.user_attrs.get("constraints", [])


def violation(clause: Clause, metrics: dict[str, float]) -> float:
    value = metrics.get(clause.key)
    if value is None:
        return float("inf")
    return value - clause.value if clause.op in ("<", "<=") else clause.value - value


def feasible(trial: optuna.trial.FrozenTrial) -> bool:
    """Neither refused before launch (pruned as infeasible) nor past a constraint."""
    return "infeasible" not in trial.user_attrs and all(v <= 0 for v in constraint_values(trial))


def half_width(trial: optuna.trial.FrozenTrial, index: int) -> float:
    """The 95% half-width of a trial's ``index``-th value (0 where it has none)."""
    halves = trial.user_attrs.get("ci95") or []
    return halves[index] if index < len(halves) else 0.0


def measured_before(trials: list[optuna.trial.FrozenTrial], params: dict[str, Any]) -> optuna.trial.FrozenTrial | None:
    """A complete trial of the same configuration whose objective proved deterministic."""
    return next(
        (
            t
            for t in trials
            if t.state == TrialState.COMPLETE and t.params == params and t.user_attrs.get("deterministic")
        ),
        None,
    )


@dataclass(frozen=True)
class Outcome:
    """What a launched trial tells the study: its values (None: it failed) and its user attributes."""

    values: list[float] | None
    attrs: dict[str, Any]


def as_before(earlier: optuna.trial.FrozenTrial) -> Outcome:
    """What a trial of a configuration ``measured_before`` is told instead of being launched."""
    attrs = {key: earlier.user_attrs[key] for key in ("ci95", "constraints", "deterministic")}
    return Outcome(earlier.values, attrs | {"same_as": earlier.number})


def enough(trials: list[optuna.trial.FrozenTrial], n_trials: int, now: float) -> bool:
    """Whether a study has its ``n_trials``: trials measured or being measured, by any worker
    (infeasible ones and those that stood back, never launched, only count toward a cap of
    ``MAX_ASKS_PER_TRIAL`` asks per trial)."""
    return claims.taken(trials, now) >= n_trials or len(trials) >= MAX_ASKS_PER_TRIAL * n_trials


def outcome(results: list[PointResult], keys: list[str], constraints: list[Clause]) -> Outcome:
    """A launched trial's points -> what the study is told: one value per objective (``keys[i]`` read
    from the i-th point, or every key from the only point), each with its 95% half-width, the
    constraints' violations, and whether the objective proved deterministic (two or more windows
    that agree exactly); a failed point or a missing objective fails the trial."""
    measured = list(zip(results, keys, strict=True)) if len(results) > 1 else [(results[0], k) for k in keys]
    failed = [r for r in results if not r.ok]
    scores = [r.metrics.get(key) for r, key in measured]
    if failed or any(s is None for s in scores):
        return Outcome(None, {"error": (failed[0].error if failed else "objective missing") or ""})
    halves = [r.metrics.get(f"{key}_ci95", 0.0) for r, key in measured]
    windows = min(r.metrics.get("windows", 1) for r in results)
    attrs = {
        "constraints": [violation(c, r.metrics) for r in results for c in constraints],
        "ci95": halves,
        "deterministic": windows >= 2 and not any(halves),
    }
    return Outcome([float(s) for s in scores if s is not None], attrs)


def tell(study: optuna.Study, trial: optuna.Trial, **result: Any) -> bool:
    """study.tell; False when the sampler has tried every point of the space: grid and brute-force
    samplers end the study by calling ``study.stop()``, which Optuna only allows inside ``optimize``
    (the trial is stored all the same)."""
    try:
        study.tell(trial, **result)
    except RuntimeError as exc:
        if "Study.stop" not in str(exc):
            raise
        return False
    return True
