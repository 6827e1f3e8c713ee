"""Optuna's side of a tuning sweep: the study's storage, the sampler by name, the constraints a trial
must meet (Optuna's convention: feasible when every value is <= 0), its half-width, and whether a
configuration was measured before with a deterministic objective (specexp.sweep.tune)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from specexp.config import ConfigError
from specexp.sweep.space import Clause, SearchSpace

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
