"""The end of a multirun: summary.csv, speedups on the child runs, crossovers on the parent run,
and the answer in the console. Written to the sweep folder first, then sent to MLflow."""

from __future__ import annotations

import csv
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specexp import tracking
from specexp.config import Config
from specexp.console import console, points_table
from specexp.point import git_sha
from specexp.report.analysis import BASELINE, apply, drafter

log = logging.getLogger("specexp")

LEAD_COLUMNS = (
    "engine.name",
    "model.name",
    "drafter.name",
    "drafter.num_steps",
    "drafter.topk",
    "drafter.num_draft_tokens",
    "decode",
    "nccl.name",
    "batch",
)


def summary_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat dict per point: its lead settings, status, every metric, where to find it."""
    flat = []
    for row in rows:
        params = row.get("params", {})
        out = {k: params.get(k, "") for k in LEAD_COLUMNS}
        out |= {"status": row.get("status"), **row.get("metrics", {})}
        out |= {"run_id": row.get("run_id"), "job_dir": row.get("job_dir"), "error": row.get("error")}
        flat.append(out)
    return flat


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def verdicts(rows: list[dict[str, Any]], speedups: dict[int, dict[str, float]], cross: dict[str, float]) -> list[str]:
    """The answer in words, per speculative drafter."""
    lines = []
    for name in dict.fromkeys(drafter(rows[i]) for i in speedups):
        pts = sorted(
            (int(rows[i]["params"]["batch"]), s["speedup"])
            for i, s in speedups.items()
            if drafter(rows[i]) == name and "speedup" in s
        )
        if not pts:
            continue
        keys = [
            k
            for k in cross
            if (k == f"crossover_batch.{name}" or k.startswith(f"crossover_batch.{name}."))
            and not k.endswith(("_lo", "_hi"))
        ]
        span = f"batch {pts[0][0]}-{pts[-1][0]}"
        if keys:
            where = ", ".join(
                f"≈ {cross[k]:.1f}"
                + (
                    f" (95% CI {cross[k + '_lo']:.1f}-{cross[k + '_hi']:.1f})"
                    if k + "_lo" in cross and k + "_hi" in cross
                    else ""
                )
                + (f" ({k.split('.', 2)[2]})" if k.count(".") > 1 else "")
                for k in keys
            )
            lines.append(f"with {name}, speculation stops paying off above batch {where}")
        elif all(s >= 1 for _, s in pts):
            lines.append(
                f"with {name}, speculation wins at every measured batch ({span}; "
                f"speedup {min(s for _, s in pts):.2f}x-{max(s for _, s in pts):.2f}x)"
            )
        else:
            lines.append(f"with {name}, speculation never pays off at any measured batch ({span})")
    return lines


@dataclass
class SweepRecorder:
    cfg: Config
    sweep_id: str
    sweep_dir: Path
    parent_id: str | None

    @classmethod
    def start(cls, cfg: Config, sweep_id: str, sweep_dir: Path, jobs: int) -> SweepRecorder:
        parent = None
        if cfg.tracking.enabled:
            try:
                parent = tracking.start_parent(
                    cfg.tracking,
                    Path(cfg.outputs),
                    sweep_id,
                    f"sweep-{sweep_id}",
                    {"specexp.git_sha": git_sha(), "specexp.jobs": str(jobs)},
                )
            except Exception:
                log.exception("could not create the sweep's MLflow parent run; points are still saved")
        return cls(cfg, sweep_id, sweep_dir, parent)

    def finish(
        self,
        rows: list[dict[str, Any]],
        interrupted: bool,
        extra_metrics: dict[str, float] | None = None,
        extra_files: list[Path] | None = None,
    ) -> None:
        """Summarize the sweep on disk, then on its parent run (with a tuner's extra results)."""
        speedups, cross = apply(rows)
        table = summary_rows(rows)
        if table:
            write_csv(self.sweep_dir / "summary.csv", table)
        from specexp.report.plots import make_plots  # plotly and matplotlib: only when a sweep ends

        plots = make_plots(rows, cross, self.sweep_dir / "plots")
        words = verdicts(rows, speedups, cross)
        (self.sweep_dir / "verdict.txt").write_text("\n".join(words) + "\n")
        console.print(points_table(table, f"sweep {self.sweep_id}"))
        for line in words:
            console.print(f"[bold]{line}[/bold]")
        if any(drafter(r) != BASELINE for r in rows) and not speedups:
            console.print("no speculative point has a baseline (drafter=none) in this sweep: no speedups")
        if self.parent_id is None:
            return
        try:
            mlflow = tracking.client(self.cfg.tracking)
            for i, ratios in speedups.items():
                if rows[i].get("run_id"):
                    tracking.log_values(mlflow, rows[i]["run_id"], metrics=ratios)
            failed = sum(r.get("status") != "ok" for r in rows)
            summary = {**cross, **(extra_metrics or {}), "points": len(rows), "points_failed": failed}
            tracking.log_values(mlflow, self.parent_id, metrics=summary)
            files = [self.sweep_dir / n for n in ("summary.csv", "verdict.txt", "multirun.yaml")]
            for path in [*files, *(extra_files or [])]:
                if path.exists():
                    mlflow.log_artifact(self.parent_id, str(path))
            for path in plots:
                mlflow.log_artifact(self.parent_id, str(path), artifact_path="plots")
            status = "KILLED" if interrupted else ("FAILED" if failed else "FINISHED")
            mlflow.set_terminated(self.parent_id, status)
        except Exception:
            log.exception("MLflow sweep logging failed; the summary is in %s", self.sweep_dir)
