"""The live record of a sweep: its MLflow parent run, and at the end summary.csv, speedups on the
child runs, crossovers on the parent, plots and the verdict in the console. Written to the sweep
folder first, then sent to MLflow. The analysis, tables and plots come from specexp.report."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specexp import tracking
from specexp.config import Config
from specexp.console import console, points_table
from specexp.report.analysis import apply
from specexp.report.summary import summary_rows, write_csv
from specexp.report.verdict import verdicts
from specexp.result import PointResult

log = logging.getLogger("specexp")


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
                    {"specexp.git_sha": tracking.git_sha(), "specexp.jobs": str(jobs)},
                )
            except Exception:
                log.exception("could not create the sweep's MLflow parent run; points are still saved")
        return cls(cfg, sweep_id, sweep_dir, parent)

    def finish(
        self,
        rows: Sequence[PointResult],
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
        if any(r.speculative for r in rows) and not speedups:
            console.print("no speculative point has a baseline (drafter=none) in this sweep: no speedups")
        if self.parent_id is None:
            return
        try:
            mlflow = tracking.client(self.cfg.tracking)
            for i, ratios in speedups.items():
                if rows[i].run_id:
                    tracking.log_values(mlflow, rows[i].run_id, metrics=ratios)
            failed = sum(not r.ok for r in rows)
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
