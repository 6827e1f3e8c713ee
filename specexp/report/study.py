"""A study's answer: the best tuned settings at each measured batch, from its points alone, so the
tuner's closing lines and ``python -m specexp.report`` on a study say the same thing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specexp.result import PointResult


def best_line(where: str, settings: Mapping[str, Any], objective: str, value: float, trial: Any) -> str:
    tuned = " ".join(f"{k}={v}" for k, v in settings.items())
    return f"best {where}: {tuned} ({objective} {value:,.1f}, trial {trial})"


def best_per_batch(rows: Sequence[PointResult], settings: Sequence[str], objective: str, maximize: bool) -> list[str]:
    """For each batch, the measured point with the best ``objective`` among feasible trials."""
    best: dict[int, PointResult] = {}
    for row in rows:
        value = row.metrics.get(objective)
        if not row.ok or value is None or row.tags.get("optuna.feasible") == "false":
            continue
        held = best.get(row.batch)
        if held is None or ((value > held.metrics[objective]) == maximize and value != held.metrics[objective]):
            best[row.batch] = row
    return [
        best_line(
            f"at batch {b}",
            {k: r.params.get(k, "-") for k in settings},
            objective,
            r.metrics[objective],
            r.tags.get("optuna.trial", "?"),
        )
        for b, r in sorted(best.items())
    ]
