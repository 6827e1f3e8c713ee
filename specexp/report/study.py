"""A study's answer: the best tuned settings at each measured batch, from every trial of the study
in its Optuna storage (whichever worker measured it), so each worker's closing lines and ``python -m
specexp.report`` on a study say the same thing; from the points alone where the storage is not known.

Each trial tells the study an estimate (specexp.sweep.trials): with a baseline, the trial's ratio to
the ``drafter=none`` point measured in turns with it (paired window by window), so that a machine
whose load drifts during the study compares every depth at the load it was measured under.

A configuration the sampler suggested more than once is one arm, not several trials: its
measurements are pooled into one estimate (a mean over windows: every window, its mean and standard
error recovered exactly from each measurement's mean, half-width and window count; a ratio: the mean
of the trials' log ratios, stats.combine). The best arm is the one whose 95% interval's conservative
end is best; every arm whose ratio to the best has a 95% interval holding 1 is named with it, because
the study cannot tell them apart. That ratio is the estimand the schedule (specexp.report.schedule)
and the verdict judge by: each arm's windows pooled, tokens over seconds, unpaired since trials are
separate launches (schedule.pooled_ratio, analysis.arms_ratio; stats.side on its draws), so the
study's best line and the schedule beneath it name the same ties. Where an arm's points are not at
hand (another worker's trials, read from the storage) the ratio is made from the told estimates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from specexp.console import fmt
from specexp.metrics import registry
from specexp.metrics.stats import Estimate, combine, ratio, side
from specexp.report.analysis import RATIO_KEYS, metric_estimate
from specexp.report.schedule import pooled_ratio
from specexp.report.summary import TRIAL
from specexp.result import PointResult

STUDY = "optuna.study"  # the tag naming the study a point was measured for
STORAGE = "optuna.storage"  # ... and its storage, where the URL holds no password


def pool(parts: Sequence[Estimate]) -> Estimate:
    """The estimates' windows as one sample: each part is a mean over ``df + 1`` windows with its
    standard error, so its windows' sum of squares is known and the union's follows."""
    sizes = [round(p.df) + 1 for p in parts]
    total = sum(sizes)
    mean = sum(n * p.value for n, p in zip(sizes, parts, strict=True)) / total
    if total < 2:
        return Estimate(mean)
    squares = sum(
        (n - 1) * n * p.se**2 + n * (p.value - mean) ** 2 for n, p in zip(sizes, parts, strict=True)
    )  # within each part ((n - 1) s², s² = n se²), and between the parts' means
    return Estimate(mean, math.sqrt(squares / (total - 1) / total), total - 1)


@dataclass
class Arm:
    """One configuration at one batch: every trial that measured it, their measurements pooled."""

    settings: tuple[tuple[str, str], ...]
    batch: int
    trials: list[str] = field(default_factory=list)
    parts: list[Estimate] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)  # how each part's interval was made
    rows: list[PointResult] = field(default_factory=list)  # the trials' points, where they are at hand

    @property
    def estimate(self) -> Estimate:
        if all(p.scale == "linear" for p in self.parts):
            return pool(self.parts)
        return combine(self.parts)

    @property
    def method(self) -> str:
        """How the interval was made, in words."""
        if len(set(self.methods)) == 1 and (len(self.parts) == 1 or self.parts[0].scale == "linear"):
            return self.methods[0]
        return f"t over the {len(self.parts)} trials' mean log ratios (each {' / '.join(sorted(set(self.methods)))})"

    @property
    def named(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.settings)

    @property
    def trials_text(self) -> str:
        if len(self.trials) == 1:
            return f"trial {self.trials[0]}"
        if self.estimate.scale == "linear":
            return f"trials {', '.join(self.trials)} pooled, {round(self.estimate.df) + 1} windows"
        return f"trials {', '.join(self.trials)} pooled"


def row_estimate(row: PointResult, key: str) -> tuple[Estimate, str] | None:
    """A point's ``key`` as recorded: a ratio to its baseline (``speedup``) from its bounds over its
    window pairs, else its mean over windows."""
    if key in RATIO_KEYS:
        pairs = int(row.metrics.get("windows_paired", 0))
        method = f"paired t over {pairs} window pairs" if pairs else "unpaired"
        est = metric_estimate(row, key)
        return None if est is None else (est, method)
    est = metric_estimate(row, key)
    return None if est is None else (est, "t over windows")


def arms(rows: Sequence[PointResult], settings: Sequence[str], objective: str) -> dict[int, list[Arm]]:
    """Per batch, the feasible configurations measured ok, in the order first measured."""
    found: dict[tuple[int, tuple], Arm] = {}
    for row in rows:
        trial = row.tags.get(TRIAL)
        told = row_estimate(row, objective) if row.ok else None
        if trial is None or told is None or row.tags.get("optuna.feasible") == "false":
            continue  # a baseline (no trial), a failed point, or one past a constraint
        tuned = tuple((k, str(row.params.get(k, "-"))) for k in settings)
        arm = found.setdefault((row.batch, tuned), Arm(tuned, row.batch))
        arm.trials.append(trial)
        arm.parts.append(told[0])
        arm.methods.append(told[1])
        arm.rows.append(row)
    out: dict[int, list[Arm]] = {}
    for (batch, _), arm in found.items():
        out.setdefault(batch, []).append(arm)
    return out


def constraint_values(trial: FrozenTrial) -> list[float]:
    """Optuna's convention: a trial is feasible when every value is <= 0."""
    return trial.user_attrs.get("constraints", [])


def feasible(trial: FrozenTrial) -> bool:
    """Neither refused before launch (pruned as infeasible) nor past a constraint."""
    return "infeasible" not in trial.user_attrs and all(v <= 0 for v in constraint_values(trial))


def stored(est: Estimate, method: str) -> dict[str, Any]:
    """An estimate as a trial's user attribute holds it (JSON)."""
    return asdict(est) | {"method": method}


def restored(trial: FrozenTrial, index: int) -> tuple[Estimate, str]:
    """A trial's told estimate of its ``index``-th objective (one told before trials kept their
    estimates: its value, without an interval)."""
    kept = trial.user_attrs.get("estimates") or []
    if index < len(kept):
        return loaded(kept[index])
    return Estimate(trial.values[index]), "no interval recorded"


def loaded(data: dict[str, Any]) -> tuple[Estimate, str]:
    """An estimate and its method back from what ``stored`` wrote."""
    fields = {k: v for k, v in data.items() if k != "method"}
    return Estimate(**fields), str(data.get("method", ""))


def trial_arms(
    trials: Sequence[FrozenTrial], settings: Sequence[str], index: int, batch: int, rows: Sequence[PointResult] = ()
) -> list[Arm]:
    """The study's feasible configurations measured ok, by any worker, from its storage: each
    trial's told estimate of objective ``index``, in the order first measured, with its point at
    ``batch`` where ``rows`` hold it. A trial told an earlier trial's values (a deterministic repeat,
    never launched) measured nothing of its own."""
    points = {r.tags[TRIAL]: r for r in rows if r.ok and r.batch == batch and TRIAL in r.tags}
    found: dict[tuple, Arm] = {}
    for t in sorted(trials, key=lambda t: t.number):
        if t.state != TrialState.COMPLETE or not feasible(t) or "same_as" in t.user_attrs or not t.values:
            continue
        tuned = tuple((k, str(t.params.get(k, "-"))) for k in settings)
        arm = found.setdefault(tuned, Arm(tuned, batch))
        est, method = restored(t, index)
        arm.trials.append(str(t.number))
        arm.parts.append(est)
        arm.methods.append(method)
        arm.rows += [points[str(t.number)]] if str(t.number) in points else []
    return list(found.values())


def study_arms(
    study: optuna.Study, settings: Sequence[str], objective: str, batch: int, rows: Sequence[PointResult] = ()
) -> dict[int, list[Arm]]:
    """Per batch, trial_arms of ``objective`` (the study's metric names: ``speedup@b4``, or the
    objective alone, measured at ``batch``), each with its point where ``rows`` hold it."""
    trials = study.get_trials(deepcopy=False)
    out: dict[int, list[Arm]] = {}
    for i, name in enumerate(study.metric_names or []):
        key, _, at = name.partition("@b")
        if key == objective:
            found = trial_arms(trials, settings, i, int(at) if at else batch, rows)
            if found:
                out[int(at) if at else batch] = found
    return out


def open_study(rows: Sequence[PointResult]) -> optuna.Study | None:
    """The study the points were measured for, from the storage their tags name (None where none is
    named or it cannot be opened: the answer then comes from the points)."""
    tagged = next((r for r in rows if r.tags.get(STORAGE) and r.tags.get(STUDY)), None)
    if tagged is None:
        return None
    url = tagged.tags[STORAGE]
    try:
        if url.startswith("journal://"):
            from optuna.storages import JournalStorage
            from optuna.storages.journal import JournalFileBackend

            path = url.removeprefix("journal://")
            if not Path(path).exists():
                return None
            storage: Any = JournalStorage(JournalFileBackend(path))
        else:
            if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
                return None
            storage = url
        return optuna.load_study(study_name=tagged.tags[STUDY], storage=storage)
    except Exception:  # moved, deleted, unreachable: the points still answer
        return None


def surely(e: Estimate, maximize: bool) -> float:
    """The end of the 95% interval that is worst for the study: what the arm surely achieves."""
    return e.lo if maximize else e.hi


def apart(a: Estimate, b: Estimate, r: Estimate | None = None) -> bool:
    """Whether the study can tell two arms apart: the 95% interval of their ratio ``r`` (default: of
    the two estimates, unpaired) excludes 1 (an arm measured in one window has no interval: it cannot
    be told apart). Two exact objectives (windows that agree, no spread) differ or not. An objective
    that is not positive has no ratio: there, whether their 95% intervals do not overlap."""
    if not (a.known and b.known):
        return False
    if r is None and a.value > 0 and b.value > 0:
        r = ratio(a, b)
    if r is not None and r.known:
        return side(r) != 0
    return abs(a.value - b.value) > a.half + b.half


def versus(a: Arm, b: Arm, objective: str | None) -> Estimate | None:
    """``a``'s ``objective`` over ``b``'s as the verdict makes a ratio (schedule.pooled_ratio: each
    arm's windows pooled, unpaired), where every trial of both has its point at hand; else None."""
    if objective is None or len(a.rows) != len(a.trials) or len(b.rows) != len(b.trials):
        return None
    return pooled_ratio(a.rows, b.rows, objective)


def best_arm(candidates: Sequence[Arm], maximize: bool, objective: str | None = None) -> tuple[Arm, list[Arm]]:
    """The arm with the best conservative end, and the arms it cannot be told apart from: by their
    ratio to it (``versus``, on ``objective``'s windows where known)."""
    best = max(candidates, key=lambda a: surely(a.estimate, maximize) * (1 if maximize else -1))
    ties = [a for a in candidates if a is not best and not apart(a.estimate, best.estimate, versus(a, best, objective))]
    return best, ties


def best_line(where: str, best: Arm, ties: Sequence[Arm], objective: str, digits: int = 1) -> str:
    """``best at batch 4: drafter.num_steps=3 (speedup 1.21 [1.10, 1.33] 95% paired t over 8 window
    pairs, trial 16)``, and when others are within its interval, says so and names them."""
    e = best.estimate
    shown = fmt(e.value, digits, bounds=(e.lo, e.hi)) + f" 95% {best.method}" if e.known else fmt(e.value, digits)
    line = f"best {where}: {best.named} ({objective} {shown}, {best.trials_text})"
    if ties:
        named = "; ".join(f"{a.named} ({a.trials_text})" for a in ties)
        line += f"; no single best: indistinguishable at 95% from {named}"
    return line


def best_per_batch(
    rows: Sequence[PointResult], settings: Sequence[str], objective: str, maximize: bool, digits: int | None = None
) -> list[str]:
    """For each batch, the best arm of the study judged on its interval (the lucky window of a noisy
    objective is not declared best), with the arms it cannot be told apart from: over every trial in
    the study's storage where the points name it, else over the points; ``digits`` as the tuner
    prints the objective (the metric registry's)."""
    digits = registry.digits(objective) if digits is None else digits
    study = open_study(rows)
    batch = next((r.batch for r in rows), 0)
    found = study_arms(study, settings, objective, batch, rows) if study is not None else {}
    found = found or arms(rows, settings, objective)
    return [
        best_line(f"at batch {b}", *best_arm(found[b], maximize, objective), objective, digits)
        for b in sorted(found)
        if found[b]
    ]


DEPTH_PLOT = "study_depth.png"


def depth_plot(
    rows: Sequence[PointResult],
    setting: str,
    objective: str,
    path: Path,
    others: Sequence[str] = (),
    maximize: bool = True,
    found: dict[int, list[Arm]] | None = None,
) -> Path | None:
    """The study's objective against ``setting`` (the depth) on the x axis, one panel per batch (each
    on its own scale), each configuration's pooled windows as one point with its 95% interval, and
    the batch's ``drafter=none`` baseline as a dashed line: where speculating pays, and how deep.
    With ``others`` tuned too (a tree's top-k and width) every configuration is a point at its depth
    and the line joins the best at each depth (the highest value, or the lowest unless ``maximize``).
    None when the setting is not a number. ``found``: the arms (every trial of the study, from its
    storage); default: the points'. A ratio to the baseline (``speedup``) has its line at 1."""
    found = found if found is not None else arms(rows, [setting, *others], objective)
    points = {
        b: sorted(((float(a.settings[0][1]), a) for a in found[b] if is_number(a.settings[0][1])), key=lambda p: p[0])
        for b in found
    }
    points = {b: p for b, p in points.items() if p}
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    batches = sorted(points)
    fig, axes = plt.subplots(len(batches), 1, figsize=(7, 3.2 * len(batches) + 0.8), sharex=True, squeeze=False)
    for ax, batch in zip(axes[:, 0], batches, strict=True):
        measured = points[batch]
        if others:  # every configuration, faint; the line below joins each depth's best
            ax.errorbar(
                [x for x, _ in measured],
                [a.estimate.value for _, a in measured],
                yerr=[a.estimate.half for _, a in measured],
                fmt="o",
                alpha=0.35,
                capsize=2,
                label=f"each {', '.join([setting, *others])}",
            )
        best: dict[float, Arm] = {}
        for x, a in measured:
            if x not in best or (a.estimate.value > best[x].estimate.value) == maximize:
                best[x] = a
        xs = sorted(best)
        ax.errorbar(
            xs,
            [best[x].estimate.value for x in xs],
            yerr=[best[x].estimate.half for x in xs],
            marker="o",
            capsize=3,
            label=f"best at each {setting}" if others else objective,
        )
        base = [
            r.metrics[objective]
            for r in rows
            if r.ok and not r.speculative and r.batch == batch and r.metrics.get(objective) is not None
        ]
        if objective in RATIO_KEYS:
            ax.axhline(1.0, linestyle="--", color="grey", label="drafter=none (each trial's own, in turns)")
        elif base:
            ax.axhline(sum(base) / len(base), linestyle="--", color="grey", label="drafter=none")
        ax.set_title(f"batch {batch}")
        ax.set_ylabel(objective)
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
    axes[-1, 0].xaxis.set_major_locator(MaxNLocator(integer=True))  # depths are whole numbers
    axes[-1, 0].set_xlabel(setting)
    fig.suptitle(f"{objective} by {setting} (95% intervals; repeated configurations pooled)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
