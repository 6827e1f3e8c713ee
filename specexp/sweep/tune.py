"""Optuna tunes speculation depth as a Hydra sweep, on Optuna's ask/tell interface.

Each trial asks the search space for a depth, composes and validates its jobs (a combination the
engine would refuse is told to the study as pruned and never launched), runs them through Hydra's
launcher, and tells the study the objective(s). With ``batches`` one trial measures several batch
sizes on one server launch and the study gets one objective per batch: the best trial per
objective is the depth schedule a deployment would use. Storage is persistent (sqlite by default,
any SQLAlchemy URL, or ``journal:///path``), so rerunning the same command resumes the study, and
several specexp processes on one storage work on one study together (specexp.sweep.claims).

Every trial of a speculative drafter is measured in turns with a ``drafter=none`` baseline of its
own (the two servers' windows alternating at each batch, specexp.sweep.turns, where they can share
the machine; else the baseline launched right before the trial): a machine whose load drifts during
the study would make one baseline measured up front stale, and every later trial would read too
slow or too fast. The study is then told the objective's ratio to that baseline (``speedup`` for
output_throughput), paired window by window, so depths measured at different loads are compared
fairly. A discrete space of at most n_trials configurations is measured whole, each once, before
any repeats (specexp.sweep.trials.covering).

The objective is noisy: each trial keeps its estimate and 95% interval (user attributes
``estimates``, ``ci95``), and the best configuration is the one whose interval's conservative end is
best (the lower end when maximizing), with those it cannot be told apart from named beside it, over
every trial in the storage, whichever worker measured it (specexp.report.study): each worker's
summary gives the study's one answer. An objective whose windows agree exactly (``ci95`` 0 over two
or more windows: greedy decoding of the same prompts) is deterministic: a configuration already
measured is told its earlier values and never launched again.
"""

from __future__ import annotations

import csv
import logging
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
from omegaconf import ListConfig
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.exceptions import ExperimentalWarning
from optuna.trial import TrialState

from specexp import live, tracking
from specexp.config import Config, ConfigError, TuneConf
from specexp.console import console, fmt, invalid_config_exits
from specexp.metrics.registry import digits, lookup
from specexp.report import schedule
from specexp.report.study import (
    DEPTH_PLOT,
    STORAGE,
    STUDY,
    Arm,
    best_arm,
    best_line,
    depth_plot,
    feasible,
    is_number,
    loaded,
    trial_arms,
)
from specexp.result import BASELINE, PointResult
from specexp.sweep import claims
from specexp.sweep.groups import refused_before_anything
from specexp.sweep.names import point_names, sweep_params
from specexp.sweep.skeleton import LaunchingSweeper, SweepRun
from specexp.sweep.space import SearchSpace, distribution, parse_condition, split_sweeps
from specexp.sweep.trials import (
    as_before,
    check_slo,
    covering,
    enough,
    importances,
    make_sampler,
    measured_before,
    one_parent,
    others_done,
    outcome,
    relative_key,
    storage_for,
    tell,
    write_trials,
)

log = logging.getLogger("specexp")


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple, ListConfig)) else [value]


class Tuner:
    """Runs a study through a sweeper's launcher. The search space: the sweeper's ``params`` and any
    sweep on the command line (``drafter.num_steps=range(1,9)``), as in hydra-optuna-sweeper."""

    def __init__(self, sweeper: LaunchingSweeper, conf: TuneConf, params: dict[str, str]) -> None:
        self.sweeper = sweeper
        self.config = sweeper.config
        self.conf = conf
        self.objectives = [str(o) for o in _as_list(self.conf.objective)]
        for name in self.objectives:
            if lookup(name) is None:
                raise ConfigError(
                    "hydra.sweeper.objective",
                    f"{name!r} is not a metric specexp records",
                    "use a key of docs/METRICS.md, e.g. output_throughput or ttft_ms_p99",
                )
        self._take_batches([int(b) for b in self.conf.batches] if self.conf.batches else None)
        self.params = params
        self.exhausted = False  # set when the sampler has tried every point of the space
        self.refused = False  # set when the scheduler refused a trial's jobs before anything ran
        self.constraints = [c for text in self.conf.constraints for c in parse_condition("constraints", text)]

    def _take_batches(self, batches: list[int] | None) -> None:
        """Measure each trial at ``batches`` (one objective per batch), or at the configured batch."""
        self.batches = batches
        if self.batches and len(self.objectives) > 1:
            raise ConfigError(
                "hydra.sweeper.objective",
                "one objective per batch already",
                "tune one metric with batches, or several without",
            )
        directions = [str(d) for d in _as_list(self.conf.direction)]
        n_obj = len(self.batches) if self.batches else len(self.objectives)
        self.directions = directions * n_obj if len(directions) == 1 else directions
        if len(self.directions) != n_obj or any(d not in ("maximize", "minimize") for d in self.directions):
            raise ConfigError(
                "hydra.sweeper.direction",
                f"{directions} for {n_obj} objective(s)",
                "give maximize/minimize once, or once per objective",
            )

    def _batches_from(self, swept: dict[str, str]) -> bool:
        """``batch=1,4`` on the command line of a study: the study at each of those batches (as
        ``hydra.sweeper.batches``), never batch as a setting to tune, where the larger batch would
        simply win and the smaller batches would get neither a baseline nor a depth of their own;
        True when the command line listed them."""
        text = swept.pop("batch", None)
        if text is None:
            return False
        dist = distribution("batch", text)
        if isinstance(dist, IntDistribution):
            dist = CategoricalDistribution(list(range(dist.low, dist.high + 1, dist.step)))
        if self.batches or not isinstance(dist, CategoricalDistribution):
            raise ConfigError(
                "batch",
                f"batch={text} in a study",
                "list the batches (batch=1,4) or set hydra.sweeper.batches=[1,4], not both",
            )
        self._take_batches(sorted({int(b) for b in dist.choices}))
        return True

    def objective_names(self) -> list[str]:
        """The study's objectives as told: each against the baseline where it is paired (``speedup``)."""
        if self.batches:
            return [f"{self.told[0]}@b{b}" for b in self.batches]
        return self.told

    def _pair(self, first: Config) -> None:
        """Whether each trial is measured in turns with a baseline, and what the study is told: the
        objective's ratio to the baseline where it has one (``told``), else the objective itself."""
        self.paired = first.baseline != "off" and first.drafter.speculative
        ratios = [relative_key(o, first.load.kind) if self.paired else None for o in self.objectives]
        self.told = [r or o for r, o in zip(ratios, self.objectives, strict=True)]
        self.paired = any(ratios)

    def sweep(self, arguments: list[str]) -> Any:
        # Optuna's notes to library authors (experimental APIs) are nothing a user can act on, nor is
        # its line for each study it creates (the space's in-memory probe included), unless asked
        if not log.isEnabledFor(logging.DEBUG):
            optuna.logging.set_verbosity(optuna.logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalWarning)
            return self._sweep(arguments)

    def _sweep(self, arguments: list[str]) -> Any:
        base, swept = split_sweeps(self.sweeper.job_arguments(arguments))
        with invalid_config_exits():
            listed = self._batches_from(swept)
        space_text = {**self.params, **swept}
        self.space = SearchSpace.parse(space_text, dict(self.conf.conditions))
        outputs = Path(str(self.config.outputs))
        url = self.conf.storage or f"sqlite:///{outputs / 'optuna.db'}"
        first = self.sweeper.compose(base)
        if listed:  # a preset's name ends with the configured batch: these batches instead
            at = "b" + "_".join(map(str, self.batches or []))
            name = self.conf.study_name.removesuffix(f"-b{first.batch}")
            self.conf.study_name = f"{name}-{at}"
        with invalid_config_exits():
            check_slo(self.objectives, first)
        self._pair(first)
        self._drop_refused(base, [k for k in self.params if k not in swept], first)
        space_text = {k: v for k, v in space_text.items() if k in self.space.distributions or k in self.space.fixed}
        if first.dry_run:
            console.print(f"search space: {self.space.distributions}\nconditions: {self.conf.conditions}")
            return None
        # the base config and the engine itself, once: a missing engine is no infeasible depth
        self.sweeper.checked_plan([base], "check")
        sampler = covering(self.conf.sampler, self.space, self.conf.n_trials)
        if sampler != self.conf.sampler:
            console.print(
                f"the space holds {self.space.size()} configuration(s), no more than n_trials={self.conf.n_trials}: "
                f"each is measured once, none twice (sampler {sampler}, not {self.conf.sampler})"
            )
        study = optuna.create_study(
            storage=storage_for(url),
            study_name=self.conf.study_name,
            directions=self.directions,
            sampler=make_sampler(sampler, self.conf.seed, self.space, bool(self.constraints)),
            load_if_exists=True,
        )
        self.url = url
        study.set_metric_names(self.objective_names())
        run = self.sweeper.new_run()
        run.summarize = lambda: schedule.add_to(
            self._summarize(study, run.sweep_dir, url, run.points()),
            run.points(),
            run.sweep_dir,
            self.told[0],
            self.directions[0] == "maximize",
        )
        self.measured_batches = self.batches or [first.batch]
        run.kind, run.settings = "study", list(self.space.distributions)
        at = ",".join(map(str, self.measured_batches))
        run.name = (
            f"{first.engine.name}/{first.model.name}: drafter {first.drafter.name}, "
            f"Optuna over {', '.join(self.space.distributions)} at batch {at}"
        )
        run.params = sweep_params(first, space_text) | {
            "study.name": self.conf.study_name,
            "study.objective": ",".join(self.objective_names()),
            "study.direction": ",".join(self.directions),
            "study.sampler": sampler,
            "study.n_trials": str(self.conf.n_trials),
            "study.baseline": "in turns with each trial" if self.paired else "none",
        }
        deadline = time.monotonic() + self.conf.timeout if self.conf.timeout else None
        self.kept = [o for o in base if not o.lstrip("+").startswith("drafter")]
        self.kept += [f"{k}={v}" for k, v in self.space.fixed.items() if not k.startswith("drafter")]

        def body(run: SweepRun) -> None:
            if run.recorder is not None and run.recorder.parent_id is not None:
                one_parent(study, run.recorder.parent_id, first.tracking)
            while not self._done(study, deadline):
                self._trial(study, base, run)
            others_done(study)  # so that this worker's answer holds every trial of the study

        self.sweeper.record(run, first, body)
        if self.refused:  # said in the trial's line: the request, not a measurement, is wrong
            raise SystemExit(2)
        if run.recorder is not None and run.recorder.untracked:
            raise SystemExit(tracking.TRACKING_FAILED)
        return study

    def _drop_refused(self, base: list[str], preset: list[str], first: Config) -> None:
        """A preset's parameters the engine refuses at any value (a chain engine and a tree's top-k)
        are not searched: their trials could only be pruned. Sweeps typed on the command line stay, so
        their trials say why the engine refuses them."""

        def accepts(values: dict[str, Any]) -> bool:
            try:
                self.sweeper.compose([*base, *self.space.overrides(values)])
            except ConfigError:
                return False
            return True

        # Only a preset's keys can be refused; without one, skip the check's Hydra composes (48 for tune_depth).
        refused = [k for k in self.space.refused(accepts) if k in preset] if preset else []
        if refused:
            self.space = self.space.without(refused)
            console.print(
                f"engine={first.engine.name} accepts no value of {', '.join(refused)} this preset searches "
                f"(a chain drafter's engine takes no tree): searching {', '.join(self.space.distributions)}"
            )
        if not self.space.distributions:
            with invalid_config_exits():
                raise ConfigError(
                    "hydra.sweeper.params", "nothing left to search on this engine", "search drafter.num_steps"
                )

    def _partners(self, number: int) -> tuple[list[list[str]], list[str]]:
        """The baseline jobs measured in turns with trial ``number`` (none unless paired), and their
        names: ``drafter=none`` at each measured batch, the trial's other settings."""
        if not self.paired:
            return [], []
        jobs = [[*self.kept, f"drafter={BASELINE}", f"batch={b}"] for b in self.measured_batches]
        names = [f"trial {number}: baseline drafter={BASELINE} batch={b}" for b in self.measured_batches]
        return jobs, names

    def _done(self, study: optuna.Study, deadline: float | None) -> bool:
        """n_trials counts trials measured or being measured, by any worker on the study; infeasible
        ones and those that stood back (never launched) only count toward a cap."""
        if enough(study.get_trials(deepcopy=False), self.conf.n_trials, time.time()):
            return True
        if deadline is not None and time.monotonic() > deadline:
            return True
        return self.exhausted or self.refused

    def _trial(self, study: optuna.Study, base: list[str], run: SweepRun) -> None:
        trial = study.ask()
        values = self.space.suggest(trial)
        claim = claims.Claim(trial, values)
        conflict = claim.conflict(study, self.conf.n_trials)
        if conflict:  # another worker measures it now, or the workers have the study's trials
            trial.set_user_attr("stood_back", conflict)
            self._tell(study, trial, state=TrialState.PRUNED)
            console.print(f"trial {trial.number} {values}: not launched, {conflict}")
            claims.back_off()
            return
        earlier = measured_before(study.get_trials(deepcopy=False), trial.params)
        if earlier is not None:
            for key, value in as_before(earlier).attrs.items():
                trial.set_user_attr(key, value)
            self._tell(study, trial, values=earlier.values)
            console.print(
                f"trial {trial.number} {values}: measured in trial {earlier.number} (deterministic); not again"
            )
            return
        overrides = [*base, *self.space.overrides(values)]
        jobs = [[*overrides, f"batch={b}"] for b in self.batches] if self.batches else [overrides]
        names = [f"trial {trial.number}: {n}" for n in point_names(jobs, [*values, "batch"])]
        partners, partner_names = self._partners(trial.number)
        try:
            planned = self.sweeper.plan([*partners, *jobs], run.sweep_id, [*partner_names, *names])
        except ConfigError as exc:  # the engine would refuse it: never launched
            trial.set_user_attr("infeasible", str(exc))
            self._tell(study, trial, state=TrialState.PRUNED)
            console.print(f"trial {trial.number} {values}: infeasible, not launched ({exc})")
            return
        live.expect(run.next_job + len(planned) * max(1, self.conf.n_trials - trial.number))
        with claim:
            launched = self.sweeper.launch(run, planned)
        results, bases = self._split(launched)
        keys = [self.told[0]] * len(results) if self.batches else self.told
        told = outcome(results, keys, self.constraints, bases if self.paired else None)
        for key, value in told.attrs.items():
            trial.set_user_attr(key, value)
        if told.values is None:
            self._tell(study, trial, state=TrialState.FAIL)
            why = (told.attrs["error"].splitlines() or [""])[0]
            self.refused = refused_before_anything(run.points())  # every trial's job would be refused alike
            stops = "; the study stops: nothing ran, the request is wrong" if self.refused else ""
            console.print(f"trial {trial.number} {values}: failed ({why}){stops}", markup=False, soft_wrap=True)
        else:
            self._tell(study, trial, values=told.values)
            found = [loaded(data) for data in told.attrs["estimates"]]
            shown = ", ".join(
                f"{name} {fmt(e.value, digits(key), bounds=(e.lo, e.hi) if e.known and e.se else None)} ({how})"
                for name, (e, how), key in zip(self.objective_names(), found, keys, strict=True)
            )
            console.print(f"trial {trial.number} {values}: {shown}")
        self._tag_runs(results, bases, trial.number, feasible(trial))

    def _split(self, launched: list[PointResult]) -> tuple[list[PointResult], list[PointResult | None]]:
        """A trial's points (one per measured batch, in order) and each one's baseline (or None)."""
        if not self.paired:
            return launched, [None] * len(launched)
        spec = {r.batch: r for r in launched if r.speculative}
        base = {r.batch: r for r in launched if not r.speculative}
        for r in base.values():
            state = fmt(r.metrics.get(self.objectives[0]), 1, r.metrics.get(f"{self.objectives[0]}_ci95"))
            console.print(
                f"baseline drafter={BASELINE} at batch {r.batch}: {self.objectives[0]} "
                f"{state if r.ok else f'failed ({r.error})'}"
            )
        return [spec[b] for b in self.measured_batches], [base.get(b) for b in self.measured_batches]

    def _tell(self, study: optuna.Study, trial: optuna.Trial, **result: Any) -> None:
        if not tell(study, trial, **result):
            self.exhausted = True

    def _tag_runs(self, results: list[PointResult], bases: list[PointResult | None], number: int, ok: bool) -> None:
        """The trial's points tagged with it (the summary reads them from the points, as the report does
        from MLflow), its baselines with the trial they were paired with; both with the study, and its
        storage where that names no password (so that a report finds every trial of the study)."""
        study = {STUDY: self.conf.study_name} | ({STORAGE: self.url} if "@" not in self.url else {})
        tagged = [(r, {"optuna.trial": str(number), "optuna.feasible": str(ok).lower()}) for r in results]
        tagged += [(b, {"optuna.baseline_of": str(number)}) for b in bases if b is not None]
        for r, tags in tagged:
            r.tags |= tags | study
        if not self.config.tracking.enabled:
            return
        try:
            mlflow = tracking.client(self.config.tracking)
            for r, _ in tagged:
                if r.run_id:
                    tracking.log_values(
                        mlflow, r.run_id, tags={k: v for k, v in r.tags.items() if k.startswith("optuna.")}
                    )
        except Exception:
            log.exception("could not tag the trial's MLflow runs")

    def _summarize(
        self, study: optuna.Study, sweep_dir: Path, url: str, rows: list[PointResult]
    ) -> tuple[dict[str, float], list[Path], list[str]]:
        """trials.csv, best.csv (the best configuration per objective, its repeated measurements
        pooled: the schedule), parent metrics, and the best settings per batch in words, naming the
        configurations it cannot be told apart from: over every trial in the storage, whichever worker
        measured it (specexp.report.study, as the report says it)."""
        trials = study.get_trials(deepcopy=False)
        names = self.objective_names()
        settings = list(self.space.distributions)
        write_trials(trials, names, list(self.space.distributions), sweep_dir / "trials.csv")
        done = [t for t in trials if t.state == TrialState.COMPLETE and feasible(t)]
        out: dict[str, float] = {"trials_complete": len(done), "trials_total": len(trials)}
        answer: list[str] = []
        found: dict[int, list[Arm]] = {}  # the first objective's arms per batch: the plot's
        with (sweep_dir / "best.csv").open("w", newline="") as f:
            w = csv.writer(f)
            head = ["objective", "direction", "value", "lo", "hi", "ci95", "method", "trial", "trials"]
            w.writerow([*head, "indistinguishable", *settings])
            for i, (name, direction) in enumerate(zip(names, self.directions, strict=True)):
                key, batch = (self.told[0] if self.batches else self.told[i]), self.batch_of(i)
                candidates = trial_arms(trials, settings, i, batch)
                if key == self.told[0]:
                    found.setdefault(batch, candidates)
                if candidates:
                    best, ties = best_arm(candidates, direction == "maximize")  # chosen on its interval
                    e, tuned = best.estimate, dict(best.settings)
                    tied = " ".join(t for a in ties for t in a.trials)
                    row = [name, direction, e.value, e.lo, e.hi, e.half, best.method, best.trials[0]]
                    w.writerow([*row, " ".join(best.trials), tied, *tuned.values()])
                    out[f"best.{name}"], out[f"best.{name}_ci95"] = e.value, e.half
                    out[f"best_trial.{name}"] = float(best.trials[0])
                    out |= {f"best.{name}.{k}": float(v) for k, v in tuned.items() if is_number(v)}
                    out |= importances(study, i, name, direction)
                    answer.append(best_line(f"at batch {batch}", best, ties, key, digits(key)))
        console.print(
            f"study {self.conf.study_name!r} in {url}: {len(done)} feasible complete trial(s), every worker's; "
            f"best per objective in {sweep_dir / 'best.csv'}"
        )
        files = [sweep_dir / "trials.csv", sweep_dir / "best.csv"]
        if settings:  # the first tuned key (the depth) on the x axis
            plot = depth_plot(
                rows,
                settings[0],
                self.told[0],
                sweep_dir / "plots" / DEPTH_PLOT,
                settings[1:],
                self.directions[0] == "maximize",
                found={b: arms for b, arms in found.items() if arms},
            )
            files += [plot] if plot else []
        return out, files, answer

    def batch_of(self, index: int) -> int:
        """The batch the study's ``index``-th objective was measured at."""
        return self.batches[index] if self.batches else self.measured_batches[0]
