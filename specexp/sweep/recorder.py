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
from specexp.report.markdown import points_markdown
from specexp.report.summary import summary_rows, write_csv
from specexp.report.verdict import verdicts
from specexp.result import PointResult

log = logging.getLogger("specexp")


def description(rows: Sequence[PointResult], words: Sequence[str], settings: Sequence[str]) -> str:
    """The parent run's description in MLflow (markdown): the answer first, then every point."""
    failed = sum(not r.ok for r in rows)
    answer = "\n".join(f"**{line}**  " for line in words) or "_no verdict: no speculative point has a baseline_"
    return f"{answer}\n\n{len(rows)} points, {failed} failed\n\n{points_markdown(rows, settings)}\n"


@dataclass
class SweepRecorder:
    cfg: Config
    sweep_id: str
    sweep_dir: Path
    parent_id: str | None
    kind: str = "grid"

    @classmethod
    def start(
        cls, cfg: Config, sweep_id: str, sweep_dir: Path, jobs: int, kind: str, name: str, params: dict[str, str]
    ) -> SweepRecorder:
        """The parent run, named by what is swept, with the swept axes and fixed settings as params."""
        parent = None
        if cfg.tracking.enabled:
            try:
                tags = {"specexp.git_sha": tracking.git_sha(), "specexp.jobs": str(jobs), "specexp.kind": kind}
                parent = tracking.start_parent(cfg.tracking, Path(cfg.outputs), sweep_id, name, tags)
                tracking.log_values(tracking.client(cfg.tracking), parent, params=params)
            except Exception:
                log.exception("could not create the sweep's MLflow parent run; points are still saved")
        return cls(cfg, sweep_id, sweep_dir, parent, kind)

    def finish(
        self,
        rows: Sequence[PointResult],
        interrupted: bool,
        extra_metrics: dict[str, float] | None = None,
        extra_files: list[Path] | None = None,
        answer: Sequence[str] = (),
        settings: Sequence[str] = (),
    ) -> None:
        """Summarize the sweep on disk, then on its parent run (with a tuner's extra results, its
        ``answer`` in words and its tuned ``settings`` as table columns)."""
        analysis = apply(rows)
        table = summary_rows(rows, settings)
        if table:
            write_csv(self.sweep_dir / "summary.csv", table)
        from specexp.report.plots import make_plots  # plotly and matplotlib: only when a sweep ends

        plots = make_plots(rows, analysis.crossovers, self.sweep_dir / "plots")
        words = [*verdicts(rows, analysis), *answer]
        (self.sweep_dir / "verdict.txt").write_text("\n".join(words) + "\n")
        console.print(points_table(table, f"sweep {self.sweep_id}", settings))
        for line in words:
            console.print(f"[bold]{line}[/bold]")
        if self.kind == "grid" and any(r.speculative for r in rows) and not analysis.speedups:
            console.print("no speculative point has a baseline (drafter=none) in this sweep: no speedups")
        if self.parent_id is None:
            return
        try:
            mlflow = tracking.client(self.cfg.tracking)
            for i, ratios in analysis.speedups.items():
                if rows[i].run_id:
                    tracking.log_values(mlflow, rows[i].run_id, metrics=ratios)
            failed = sum(not r.ok for r in rows)
            summary = {**analysis.crossovers, **(extra_metrics or {}), "points": len(rows), "points_failed": failed}
            note = description(rows, words, settings)
            tracking.log_values(mlflow, self.parent_id, metrics=summary, tags={"mlflow.note.content": note})
            files = [self.sweep_dir / n for n in ("summary.csv", "verdict.txt", "multirun.yaml")]
            for path in [*files, *(extra_files or [])]:
                if path.exists():
                    mlflow.log_artifact(self.parent_id, str(path))
            for path in plots:
                mlflow.log_artifact(self.parent_id, str(path), artifact_path="plots")
            status = "KILLED" if interrupted else ("FAILED" if failed else "FINISHED")
            mlflow.set_terminated(self.parent_id, status)
            exp_id = mlflow.get_run(self.parent_id).info.experiment_id
            console.print(f"in MLflow: {tracking.ui_hint(self.cfg.tracking, exp_id, self.parent_id)}")
        except Exception:
            log.exception("MLflow sweep logging failed; the summary is in %s", self.sweep_dir)
