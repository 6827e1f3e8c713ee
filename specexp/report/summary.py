"""The table of a sweep's points: one flat row per point, as summary.csv and every table show it.

Rows come in the order the points ran (with ``repeats``, the interleaved launch order)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specexp.result import PointResult

METHOD_TAG = "specexp.speedup_method"  # paired | unpaired: how a point's ratios were estimated (report.analysis)

# The settings a summary row leads with, before status and metrics.
LEAD_COLUMNS = (
    "engine.name",
    "model.name",
    "drafter.name",
    "drafter.num_steps",
    "drafter.topk",
    "drafter.num_draft_tokens",
    "decode",
    "nccl.name",
    "load.kind",
    "batch",
    "load.rate",
    "repeat",
)


TRIAL = "optuna.trial"  # the tag naming the study's trial a point measured


def with_intervals_beside(metrics: dict[str, float]) -> dict[str, float]:
    """The metrics with each interval right after its ``<key>``: ``<key>_ci95`` (half its width) and its
    ends ``<key>_lo`` / ``<key>_hi`` (a symmetric interval's made from the half-width), so that every
    row of summary.csv reads an interval as [lo, hi]."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if key.endswith(("_ci95", "_lo", "_hi")) and key.rpartition("_")[0] in metrics:
            continue
        out[key] = value
        if (half := metrics.get(f"{key}_ci95")) is not None:
            out[f"{key}_ci95"] = half
            out[f"{key}_lo"] = metrics.get(f"{key}_lo", value - half)
            out[f"{key}_hi"] = metrics.get(f"{key}_hi", value + half)
    return out | metrics


def summary_rows(results: Sequence[PointResult], settings: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One flat dict per point: its lead settings (and ``settings``), status, how its speedup was
    estimated (``speedup_method``: paired or unpaired, where some point has a speedup), every metric
    (each interval beside its value), where to find it."""
    rows = []
    trials = any(TRIAL in r.tags for r in results)  # a study's points: which trial measured each
    methods = any(METHOD_TAG in r.tags for r in results)
    for r in results:
        row = {"trial": r.tags.get(TRIAL, "")} if trials else {}
        row |= {k: r.params.get(k, "") for k in dict.fromkeys([*LEAD_COLUMNS, *settings])}
        row |= {"status": r.status} | ({"speedup_method": r.tags.get(METHOD_TAG, "")} if methods else {})
        row |= with_intervals_beside(r.metrics)
        row |= {"run_id": r.run_id, "job_dir": r.job_dir, "error": r.error}
        rows.append(row)
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
