"""A sweep read back from MLflow as rows, the same shape the sweeper builds while it runs.

The store is the record of a sweep (the sweep folder may be on another machine or gone), so the
report works from the parent run and its children alone, offline on a sqlite store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Run

from specexp.report.analysis import AXIS_PARAMS, x_of
from specexp.report.summary import LEAD_COLUMNS
from specexp.result import PointResult
from specexp.tracking import PARENT_ROLE

LATEST = "latest"
SWEEP_RECORD = "sweep.json"  # what a sweep's or study's folder records of it (specexp.sweep.folder)
_PARENTS = f"tags.`specexp.role` = '{PARENT_ROLE}'"
# Ways to name a sweep, tried in order.
_REFS = ("tags.`specexp.sweep_id` = '{}'", "attributes.run_name = '{}'", "attributes.run_id = '{}'")


class SweepNotFound(LookupError):
    pass


@dataclass
class Sweep:
    sweep_id: str
    parent_id: str
    name: str
    rows: list[PointResult]
    kind: str = "grid"  # grid | study
    params: dict[str, str] = field(default_factory=dict)  # the parent's: swept axes, fixed settings

    @property
    def settings(self) -> list[str]:
        """The swept keys that are settings of their own: a study's tuned parameters, a grid's
        ``decode``; not the load (its own column) nor a group (``drafter``: the config column names it)."""
        swept = [k.removeprefix("swept.") for k in self.params if k.startswith("swept.")]
        return [k for k in swept if k not in AXIS_PARAMS and any(k in r.params for r in self.rows)]


def _search(mlflow: MlflowClient, exp_id: str, where: str, order_by: list[str] | None = None) -> list[Run]:
    runs: list[Run] = []
    token = None
    while True:
        page = mlflow.search_runs([exp_id], where, max_results=1000, order_by=order_by, page_token=token)
        runs += page
        token = page.token
        if not token:
            return runs


def find_sweep_parent(mlflow: MlflowClient, exp_id: str, ref: str) -> Run:
    """The parent run named by ``ref``: a sweep id, a run name, a run id, or "latest": the newest
    sweep of either kind (a grid or a study), as the one just run is what a user asks about."""
    if "'" in ref:
        raise SweepNotFound(f"no sweep {ref!r}: quotes are not allowed in a sweep reference")
    newest = ["attributes.start_time DESC"]
    if ref == LATEST and (recent := mlflow.search_runs([exp_id], _PARENTS, max_results=1, order_by=newest)):
        return recent[0]
    wheres = [] if ref == LATEST else [f"{_PARENTS} and {w.format(ref)}" for w in _REFS]
    for where in wheres:
        runs = mlflow.search_runs([exp_id], where, max_results=1, order_by=newest)
        if runs:
            return runs[0]
    if ref == LATEST:
        raise SweepNotFound("no sweep in this experiment yet (a multirun creates one: python -m specexp ... -m)")
    raise SweepNotFound(f"no sweep matches {ref!r} (tried sweep id, run name and run id)")


def folder_record(ref: str) -> dict[str, Any] | None:
    """The record of the sweep or study whose folder ``ref`` names (outputs/multirun/<id>: its sweep
    id, its tracking store); None when ``ref`` names no folder (an id, a run name)."""
    folder = Path(ref).expanduser()
    if not folder.is_dir():
        return None
    path = folder / SWEEP_RECORD
    if not path.is_file():
        raise SweepNotFound(
            f"{ref}: no {SWEEP_RECORD} in this folder, so it is no sweep's or study's folder; "
            "give one under outputs/multirun, or a sweep id"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def point_of(run: Run) -> PointResult:
    status = run.data.tags.get("specexp.status") or ("ok" if run.info.status == "FINISHED" else "failed")
    return PointResult.from_params(
        status, dict(run.data.params), metrics=dict(run.data.metrics), tags=dict(run.data.tags), run_id=run.info.run_id
    )


def _order(row: PointResult) -> tuple:
    return (*(str(row.params.get(k, "")) for k in LEAD_COLUMNS if k not in AXIS_PARAMS), x_of(row))


def fetch_sweep(mlflow: MlflowClient, experiment: str, ref: str) -> Sweep:
    """The sweep's points, ordered by configuration then load; points without a batch are skipped."""
    exp = mlflow.get_experiment_by_name(experiment)
    if exp is None:
        raise SweepNotFound(f"no experiment {experiment!r} in this tracking store")
    parent = find_sweep_parent(mlflow, exp.experiment_id, ref)
    sweep_id = parent.data.tags.get("specexp.sweep_id", "")
    runs = _search(mlflow, exp.experiment_id, f"tags.`specexp.sweep_id` = '{sweep_id}'")
    rows = [point_of(r) for r in runs if r.info.run_id != parent.info.run_id and "batch" in r.data.params]
    kind = parent.data.tags.get("specexp.kind", "grid")
    order = sorted(rows, key=_order)
    return Sweep(sweep_id, parent.info.run_id, parent.info.run_name, order, kind, dict(parent.data.params))
