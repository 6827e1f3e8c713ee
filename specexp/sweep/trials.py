"""Optuna's side of a tuning sweep: the study's storage, the sampler by name (a small discrete space
measured whole before anything repeats), the constraints a trial must meet (Optuna's convention:
feasible when every value is <= 0), what a trial tells the study (its value against the baseline it
took turns with, and that value's interval), and whether a configuration was measured before with a
deterministic objective (specexp.sweep.tune). With several workers on one study (specexp.sweep.claims)
each worker's answer waits for the trials the others still measure, and the study has one parent run
in MLflow, the later workers' parent runs its children."""

from __future__ import annotations

import csv
import logging
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from specexp import tracking
from specexp.config import Config, ConfigError, TrackingConfig
from specexp.console import console
from specexp.metrics.registry import lookup
from specexp.metrics.stats import Estimate
from specexp.report.analysis import RATIOS, metric_estimate, ratio_estimates
from specexp.report.study import constraint_values, feasible, restored, stored
from specexp.result import PointResult
from specexp.sweep import claims
from specexp.sweep.space import Clause, SearchSpace

log = logging.getLogger("specexp")

MAX_ASKS_PER_TRIAL = 10
PARENT = "specexp.parent_run"  # the study's user attribute: its parent run in MLflow
SETTLE_S = 2.0  # how long two workers that claimed the parent at once take to see which claim stands
POLL_S = 2.0
SAMPLERS = ("tpe", "random", "grid", "bruteforce", "nsga2", "cmaes", "qmc", "gp")


def storage_for(url: str) -> str | JournalStorage:
    if url.startswith("journal://"):
        path = Path(url.removeprefix("journal://"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return url


def covering(name: str, space: SearchSpace, n_trials: int) -> str:
    """The sampler a study runs: a discrete space of at most ``n_trials`` configurations is measured
    whole, each configuration once, before any is measured again (Optuna's brute-force sampler; a
    model-based one such as TPE proposes repeats long before it has tried every point: depths 5, 6,
    5, 5 of 1-8); a grid already covers its space, and a larger or continuous space is searched."""
    if name in ("grid", "bruteforce"):
        return name
    size = space.size()
    return "bruteforce" if size is not None and size <= n_trials else name


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


def check_slo(objectives: list[str], cfg: Config) -> None:
    """Goodput and attainment exist only under an SLO: without one the objective would be missing
    from every trial (ConfigError)."""
    needing = [o for o in objectives if lookup(o).key in ("goodput", "slo_attainment")]
    if needing and not cfg.slo.given:
        raise ConfigError(
            "slo",
            f"objective {needing[0]} needs a latency target, and none is set",
            "set slo.ttft_ms and/or slo.tpot_ms, e.g. load=rate rate=4 load.max_concurrency=16 slo.ttft_ms=500",
        )


def violation(clause: Clause, metrics: dict[str, float]) -> float:
    value = metrics.get(clause.key)
    if value is None:
        return float("inf")
    return value - clause.value if clause.op in ("<", "<=") else clause.value - value


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
    attrs = {key: earlier.user_attrs[key] for key in ("ci95", "constraints", "deterministic", "estimates")}
    return Outcome(earlier.values, attrs | {"same_as": earlier.number})


def relative_key(objective: str, load: str) -> str | None:
    """The ratio to the baseline that stands for ``objective`` at a load kind (``speedup`` for
    output_throughput in a closed loop, specexp.report.analysis.RATIOS); None where it has none."""
    return next((key for key, metric in RATIOS.get(load, ()) if metric == objective), None)


def told_estimate(row: PointResult, key: str, base: PointResult | None) -> tuple[Estimate, str] | None:
    """What a trial's point tells the study of ``key``, and how its interval was made: with ``base``
    (the drafter=none point measured in turns with it) the ratio ``key`` to it, paired window by
    window where their windows took turns; else the point's own mean over its windows."""
    if base is None:
        est = metric_estimate(row, key)
        return None if est is None else (est, "t over windows")
    used, _, pairs = ratio_estimates(row, base)
    if key not in used:
        return None
    return used[key], f"paired t over {pairs} window pairs" if pairs else "unpaired, arms one after the other"


def enough(trials: list[optuna.trial.FrozenTrial], n_trials: int, now: float) -> bool:
    """Whether a study has its ``n_trials``: trials measured or being measured, by any worker
    (infeasible ones and those that stood back, never launched, only count toward a cap of
    ``MAX_ASKS_PER_TRIAL`` asks per trial)."""
    return claims.taken(trials, now) >= n_trials or len(trials) >= MAX_ASKS_PER_TRIAL * n_trials


def outcome(
    results: list[PointResult],
    keys: list[str],
    constraints: list[Clause],
    bases: Sequence[PointResult | None] | None = None,
) -> Outcome:
    """A launched trial's points -> what the study is told: one value per objective (``keys[i]`` read
    from the i-th point, or every key from the only point; against ``bases[i]``, the i-th point's
    baseline, where given: told_estimate), each with its 95% half-width and its estimate (attribute
    ``estimates``, from which the study's answer is made, specexp.report.study), the constraints'
    violations, and whether the objective proved deterministic (two or more windows that agree
    exactly); a failed point or baseline, or a missing objective, fails the trial."""
    measured = list(zip(results, keys, strict=True)) if len(results) > 1 else [(results[0], k) for k in keys]
    partners = list(bases or [None] * len(results))
    partners = partners * len(keys) if len(results) == 1 else partners
    failed = [r for r in [*results, *partners] if r is not None and not r.ok]
    if failed:
        base = " (its drafter=none baseline)" if failed[0] in partners else ""
        return Outcome(None, {"error": f"{failed[0].error or ''}{base}"})
    told = [told_estimate(r, key, base) for (r, key), base in zip(measured, partners, strict=True)]
    if any(t is None for t in told):
        return Outcome(None, {"error": "objective missing"})
    found = [t for t in told if t is not None]
    halves = [est.half for est, _ in found]
    windows = min(r.metrics.get("windows", 1) for r in results)
    attrs = {
        "constraints": [violation(c, r.metrics) for r in results for c in constraints],
        "ci95": halves,
        "estimates": [stored(est, method) for est, method in found],
        "deterministic": windows >= 2 and not any(halves),
    }
    return Outcome([est.value for est, _ in found], attrs)


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


def write_trials(trials: list[optuna.trial.FrozenTrial], names: list[str], settings: list[str], path: Path) -> None:
    """trials.csv: every trial of the study, each worker's, with its told values and 95% intervals."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        objectives = (c for n in names for c in (n, f"{n}_ci95", f"{n}_lo", f"{n}_hi"))
        w.writerow(["trial", "state", "feasible", "worker", *objectives, *settings])
        for t in trials:
            values = []
            for i, v in enumerate(t.values or []):
                est, _ = restored(t, i)
                values += [v, half_width(t, i), est.lo, est.hi]
            worker = t.user_attrs.get(claims.WORKER, "")
            w.writerow(
                [t.number, t.state.name, feasible(t), worker, *(values or [""] * 4 * len(names))]
                + [t.params.get(k, "") for k in settings]
            )


def importances(study: optuna.Study, index: int, name: str, direction: str) -> dict[str, float]:
    """How much each parameter matters to reaching the best values (PED-ANOVA, which ranks low
    targets as best: a maximised objective is negated)."""
    sign = -1.0 if direction == "maximize" else 1.0
    try:
        with warnings.catch_warnings():  # its reminder that low targets count as best: handled here
            warnings.simplefilter("ignore", UserWarning)
            imp = optuna.importance.get_param_importances(study, target=lambda t: sign * t.values[index])
    except (RuntimeError, ValueError, ZeroDivisionError):
        return {}  # too few trials, or a parameter never varied
    return {f"importance.{name}.{k}": v for k, v in imp.items()}


def one_parent(study: optuna.Study, mine: str, cfg: TrackingConfig) -> None:
    """One parent run per study: the first worker's parent run (named in the study's storage) is the
    study's; a later worker's parent run becomes its child, so the study's runs sit under one run.
    Two workers that name theirs at once both read after SETTLE_S which name stood (the last
    written), and agree."""
    if study.user_attrs.get(PARENT) is None:
        study.set_user_attr(PARENT, mine)
        time.sleep(SETTLE_S)
    owner = study.user_attrs.get(PARENT)
    if owner in (None, mine):
        return
    try:
        tracking.log_values(tracking.client(cfg), mine, tags={"mlflow.parentRunId": owner})
    except Exception:
        log.exception("could not put this worker's parent run under the study's")
    console.print(f"study {study.study_name!r}: this worker's runs go under the study's parent run {owner}")


def others_done(study: optuna.Study) -> None:
    """Wait while other workers still measure trials of the study (their claims live: a worker that
    died lets its claim lapse), so that this worker's answer holds every trial."""
    said = False
    while running := [t.number for t in study.get_trials(deepcopy=False) if claims.live(t, time.time())]:
        if not said:
            console.print(f"waiting for trial(s) {running} that other workers measure, for the study's whole answer")
            said = True
        time.sleep(POLL_S)
