"""A study's answer: the best tuned settings at each measured batch, from its points alone, so the
tuner's closing lines and ``python -m specexp.report`` on a study say the same thing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specexp.result import PointResult


def best_line(
    where: str, settings: Mapping[str, Any], objective: str, value: float, trial: Any, half: float = 0.0
) -> str:
    tuned = " ".join(f"{k}={v}" for k, v in settings.items())
    shown = f"{value:,.1f}" + (f" ± {half:,.1f}" if half else "")
    return f"best {where}: {tuned} ({objective} {shown}, trial {trial})"


def surely(row: PointResult, objective: str, maximize: bool) -> float:
    """The end of the point's 95% interval that is worst for the study: what it surely achieves."""
    value, half = row.metrics[objective], row.metrics.get(f"{objective}_ci95", 0.0)
    return value - half if maximize else value + half


def best_per_batch(rows: Sequence[PointResult], settings: Sequence[str], objective: str, maximize: bool) -> list[str]:
    """For each batch, the measured point with the best ``objective`` among feasible trials, judged
    on its interval (the lucky window of a noisy objective is not declared best)."""
    best: dict[int, PointResult] = {}
    for row in rows:
        if not row.ok or row.metrics.get(objective) is None or row.tags.get("optuna.feasible") == "false":
            continue
        held = best.get(row.batch)
        mine, theirs = surely(row, objective, maximize), held and surely(held, objective, maximize)
        if held is None or ((mine > theirs) == maximize and mine != theirs):
            best[row.batch] = row
    return [
        best_line(
            f"at batch {b}",
            {k: r.params.get(k, "-") for k in settings},
            objective,
            r.metrics[objective],
            r.tags.get("optuna.trial", "?"),
            r.metrics.get(f"{objective}_ci95", 0.0),
        )
        for b, r in sorted(best.items())
    ]
