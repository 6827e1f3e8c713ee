"""A study's answer: the best tuned settings at each measured batch, from its points alone, so the
tuner's closing lines and ``python -m specexp.report`` on a study say the same thing.

A configuration the sampler suggested more than once is one arm, not several trials: the windows of
all its measurements are pooled into one estimate (its mean and standard error over every window,
recovered exactly from each measurement's mean, half-width and window count). The best arm is the
one whose 95% interval's conservative end is best; every arm whose ratio to the best has a 95%
interval holding 1 is named with it, because the study cannot tell them apart. That ratio is the one
the schedule (specexp.report.schedule) and the verdict judge by (stats.ratio: trials are separate
launches, so unpaired; stats.side on its draws), so the study's best line and the schedule beneath it
name the same ties.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specexp.console import fmt
from specexp.metrics.stats import Estimate, from_interval, ratio, side
from specexp.result import PointResult


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
    """One configuration at one batch: every trial that measured it, their windows pooled."""

    settings: tuple[tuple[str, str], ...]
    batch: int
    trials: list[str] = field(default_factory=list)
    parts: list[Estimate] = field(default_factory=list)

    @property
    def estimate(self) -> Estimate:
        return pool(self.parts)

    @property
    def named(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.settings)

    @property
    def trials_text(self) -> str:
        if len(self.trials) == 1:
            return f"trial {self.trials[0]}"
        return f"trials {', '.join(self.trials)} pooled, {round(self.estimate.df) + 1} windows"


def arms(rows: Sequence[PointResult], settings: Sequence[str], objective: str) -> dict[int, list[Arm]]:
    """Per batch, the feasible configurations measured ok, in the order first measured."""
    found: dict[tuple[int, tuple], Arm] = {}
    for row in rows:
        value = row.metrics.get(objective)
        trial = row.tags.get("optuna.trial")
        if trial is None or not row.ok or value is None or row.tags.get("optuna.feasible") == "false":
            continue  # a baseline (no trial), a failed point, or one past a constraint
        tuned = tuple((k, str(row.params.get(k, "-"))) for k in settings)
        arm = found.setdefault((row.batch, tuned), Arm(tuned, row.batch))
        arm.trials.append(trial)
        windows = int(row.metrics.get("windows", 1))
        arm.parts.append(from_interval(value, row.metrics.get(f"{objective}_ci95"), windows))
    out: dict[int, list[Arm]] = {}
    for (batch, _), arm in found.items():
        out.setdefault(batch, []).append(arm)
    return out


def surely(e: Estimate, maximize: bool) -> float:
    """The end of the 95% interval that is worst for the study: what the arm surely achieves."""
    return e.lo if maximize else e.hi


def apart(a: Estimate, b: Estimate) -> bool:
    """Whether the study can tell two arms apart: the 95% interval of their ratio excludes 1 (an arm
    measured in one window has no interval: it cannot be told apart). Two exact objectives (windows
    that agree, no spread) differ or not. An objective that is not positive has no ratio: there,
    whether their 95% intervals do not overlap."""
    if not (a.known and b.known):
        return False
    r = ratio(a, b) if a.value > 0 and b.value > 0 else None
    if r is not None and r.known:
        return side(r) != 0
    return abs(a.value - b.value) > a.half + b.half


def best_arm(candidates: Sequence[Arm], maximize: bool) -> tuple[Arm, list[Arm]]:
    """The arm with the best conservative end, and the arms it cannot be told apart from."""
    best = max(candidates, key=lambda a: surely(a.estimate, maximize) * (1 if maximize else -1))
    ties = [a for a in candidates if a is not best and not apart(a.estimate, best.estimate)]
    return best, ties


def best_line(where: str, best: Arm, ties: Sequence[Arm], objective: str, digits: int = 1) -> str:
    """``best at batch 4: drafter.num_steps=3 (output_throughput 660 [555, 765] 95% t over windows,
    trial 16)``, and when
    others are within its interval, says so and names them."""
    e = best.estimate
    shown = fmt(e.value, digits, bounds=(e.lo, e.hi)) + " 95% t over windows" if e.known else fmt(e.value, digits)
    line = f"best {where}: {best.named} ({objective} {shown}, {best.trials_text})"
    if ties:
        named = "; ".join(f"{a.named} ({a.trials_text})" for a in ties)
        line += f"; no single best: indistinguishable at 95% from {named}"
    return line


def best_per_batch(
    rows: Sequence[PointResult], settings: Sequence[str], objective: str, maximize: bool, digits: int = 1
) -> list[str]:
    """For each batch, the best arm of the study judged on its interval (the lucky window of a noisy
    objective is not declared best), with the arms it cannot be told apart from."""
    found = arms(rows, settings, objective)
    return [
        best_line(f"at batch {b}", *best_arm(found[b], maximize), objective, digits) for b in sorted(found) if found[b]
    ]


DEPTH_PLOT = "study_depth.png"


def depth_plot(
    rows: Sequence[PointResult],
    setting: str,
    objective: str,
    path: Path,
    others: Sequence[str] = (),
    maximize: bool = True,
) -> Path | None:
    """The study's objective against ``setting`` (the depth) on the x axis, one panel per batch (each
    on its own scale), each configuration's pooled windows as one point with its 95% interval, and
    the batch's ``drafter=none`` baseline as a dashed line: where speculating pays, and how deep.
    With ``others`` tuned too (a tree's top-k and width) every configuration is a point at its depth
    and the line joins the best at each depth (the highest value, or the lowest unless ``maximize``).
    None when the setting is not a number."""
    found = arms(rows, [setting, *others], objective)
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
        if base:
            ax.axhline(base[0], linestyle="--", color="grey", label="drafter=none")
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
