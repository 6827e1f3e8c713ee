"""The live record of a sweep: sweep.json, its MLflow parent run, and after every point summary.csv,
the verdict, speedups on the child runs and crossovers, counts and the description on the parent;
at the end plots, artifacts and the verdict in the console. Written to the sweep folder first, then
sent to MLflow, so an interrupted or killed sweep still shows every point that finished. The
analysis, tables and plots come from specexp.report."""

from __future__ import annotations

import bisect
import contextlib
import itertools
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mlflow import MlflowClient
from mlflow.utils.validation import MAX_TAG_VAL_LENGTH
from rich.text import Text

from specexp import atomic, live, tracking
from specexp.config import TrackingConfig
from specexp.console import console, link_lines, points_table
from specexp.metrics.registry import table_keys
from specexp.point.upload import ERROR_TAG, upload_saved
from specexp.report.analysis import METHOD_TAG, apply
from specexp.report.html_report import write_report
from specexp.report.markdown import points_markdown
from specexp.report.summary import TRIAL, summary_rows, write_csv
from specexp.report.verdict import METHODS_LEAD, verdicts
from specexp.result import PointResult
from specexp.sweep import folder

log = logging.getLogger("specexp")


def description(rows: Sequence[PointResult], words: Sequence[str], settings: Sequence[str]) -> str:
    """The parent run's description in MLflow (markdown): the answer first, then how many points,
    how the intervals were made (the verdict's methods line), and every point; MLflow's run page
    shows the first few lines of it. MLflow cuts a tag at MAX_TAG_VAL_LENGTH characters (and warns
    on the console): a longer one keeps the answer and the table's first rows whole and names the
    files that hold the rest."""
    failed = sum(not r.ok for r in rows)
    how = "".join(f"_{line}_\n\n" for line in words if line.startswith(METHODS_LEAD))
    said = [line for line in words if not line.startswith(METHODS_LEAD)]
    answer = "\n".join(f"**{line}**  " for line in said) or "_no verdict: no speculative point has a baseline_"
    if len(answer) > MAX_TAG_VAL_LENGTH // 2:
        answer = answer[: MAX_TAG_VAL_LENGTH // 2].rsplit("\n", 1)[0] + "\n\n_… the whole verdict: verdict.txt_"
    head = f"{answer}\n\n{len(rows)} points, {failed} failed\n\n{how}"
    table = points_markdown(rows, settings).splitlines()
    text = head + "\n".join(table) + "\n"
    if len(text) <= MAX_TAG_VAL_LENGTH:
        return text
    room = MAX_TAG_VAL_LENGTH - len(head) - len(f"\n\n_… {len(table)} more points: summary.csv_\n")
    ends = list(itertools.accumulate(len(line) + 1 for line in table))  # characters up to each line's end
    kept = max(2, bisect.bisect_right(ends, room))  # a header and its rule stay
    return head + "\n".join(table[:kept]) + f"\n\n_… {len(table) - kept} more points: summary.csv_\n"


@dataclass
class SweepRecorder:
    tracking: TrackingConfig
    outputs: Path
    sweep_id: str
    sweep_dir: Path
    parent_id: str | None
    kind: str = "grid"
    settings: list[str] = field(default_factory=list)  # keys shown as table columns (a study's tuned ones)
    untracked: bool = False  # something did not reach MLflow: specexp.sync uploads it later
    disk_error: str | None = None  # the first write to the sweep folder that failed
    swept: list[str] = field(default_factory=list)  # the swept keys: columns of the points' view in MLflow
    view: str | None = None  # that view's id, once saved

    @classmethod
    def start(
        cls,
        tracking_cfg: TrackingConfig,
        outputs: Path,
        sweep_id: str,
        sweep_dir: Path,
        kind: str,
        name: str,
        params: dict[str, str],
        settings: Sequence[str] = (),
    ) -> SweepRecorder:
        """The sweep's record and parent run (a resumed sweep keeps its own), named by what is swept,
        with the swept axes and fixed settings as params; TrackingFailed when the parent run cannot
        be created, before any server starts."""
        parent = None
        if tracking_cfg.enabled:
            try:
                tags = {"specexp.git_sha": tracking.git_sha(), "specexp.kind": kind}
                parent = tracking.start_parent(tracking_cfg, outputs, sweep_id, name, tags, params)
            except Exception as exc:
                raise tracking.TrackingFailed(
                    f"could not create the sweep's parent run in {tracking_cfg.uri} ({tracking.store_message(exc)}). "
                    "Fix: check "
                    f"tracking.uri and tracking.experiment={tracking_cfg.experiment} (an active experiment), or run "
                    "with tracking.enabled=false and upload later with python -m specexp.sync"
                ) from None
        recorder = cls(tracking_cfg, outputs, sweep_id, sweep_dir, parent, kind, list(settings))
        recorder.swept = [k.removeprefix("swept.") for k in params if k.startswith("swept.")]
        with recorder._writing():
            recorder._write_record("running", name, params)
        return recorder

    @classmethod
    def of(cls, sweep_dir: Path) -> SweepRecorder:
        """The recorder of a sweep folder on disk (specexp.sync), its parent run found or created."""
        record = folder.read_record(sweep_dir)
        if record is None:
            raise FileNotFoundError(f"{sweep_dir / folder.RECORD} does not exist: not a sweep folder")
        cfg = TrackingConfig(**{**record["tracking"], "enabled": True})
        return cls.start(
            cfg,
            Path(record["outputs"]),
            record["sweep_id"],
            sweep_dir,
            record.get("kind", "grid"),
            record.get("name", f"sweep-{record['sweep_id']}"),
            record.get("params", {}),
            record.get("settings", []),
        )

    def completed(self) -> list[PointResult]:
        """The sweep's points on disk, any upload an interrupt or the store cut short completed (a
        point keeps results.json; uploading a complete one again adds nothing)."""
        done = []
        for number, row in folder.job_results(self.sweep_dir).items():
            try:
                if self.parent_id is not None:
                    row = upload_saved(self.tracking, self.outputs, row, self.sweep_dir / str(number))
            except Exception as exc:
                self.untracked = True
                log.error("could not upload point %d of %s (%s)", number, self.sweep_dir, tracking.store_message(exc))
            done.append(row)
        return done

    def _write_record(self, state: str, name: str | None = None, params: dict[str, str] | None = None) -> None:
        earlier = folder.read_record(self.sweep_dir) or {}
        folder.write_record(
            self.sweep_dir,
            {
                "sweep_id": self.sweep_id,
                "started": earlier.get("started", time.strftime("%Y-%m-%dT%H:%M:%S")),
                "state": state,
                "parent_run_id": self.parent_id or earlier.get("parent_run_id"),
                "kind": self.kind,
                "name": name or earlier.get("name"),
                "params": params if params is not None else earlier.get("params", {}),
                "settings": self.settings,
                "tracking": asdict(self.tracking),
                "outputs": str(self.outputs),
            },
        )

    def update(self, rows: Sequence[PointResult]) -> None:
        """After every point: summary and verdict on disk, speedups, counts and the description in MLflow."""
        speedups, cross, words = self._write(rows, ())
        live.verdict(words)
        self._publish(rows, speedups, cross, words, {}, [], None)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A write to the sweep folder (each whole or not at all, specexp.atomic); one that fails is
        said once, the sweep goes on and ends FAILED with the reason on its parent run."""
        try:
            yield
        except OSError as exc:
            if self.disk_error is None:
                self.disk_error = atomic.reason(exc)
                log.error("%s; the sweep goes on and will end FAILED", self.disk_error)

    def finish(
        self,
        rows: Sequence[PointResult],
        interrupted: bool,
        extra_metrics: dict[str, float] | None = None,
        extra_files: list[Path] | None = None,
        answer: Sequence[str] = (),
        show: bool = True,
    ) -> None:
        """Summarize the sweep on disk (plots too), then on its parent run, which ends FINISHED,
        FAILED (a point failed) or KILLED (interrupted); a tuner adds its extra results and its
        ``answer`` in words."""
        from specexp.report import changing_load  # scipy and matplotlib: only when a sweep ends

        phased: list[Path] = []
        with self._writing():  # a changing load's phases, regret and timeline (specexp.report.changing_load)
            phased, phase_words = changing_load.write(self.sweep_dir, rows)
            answer = [*answer, *phase_words]
        from specexp.report import required_lookup  # what a losing drafter would need: a stored map

        answer = [*answer, *required_lookup.lines(rows, self.outputs)]
        speedups, cross, words = self._write(rows, answer)
        from specexp.report.plots import make_plots  # plotly and matplotlib: only when a sweep ends

        # a study's depths share each batch: its plot is the tuner's, depth on the x axis
        plots: list[Path] = []
        if self.kind != "study":
            with self._writing(), atomic.folder(self.sweep_dir / "plots") as drawn:
                plots = [self.sweep_dir / "plots" / p.name for p in make_plots(rows, cross, drawn)]
        if show:
            console.print(points_table(summary_rows(rows, self.settings), f"sweep {self.sweep_id}", self.settings))
            for line in words:
                console.print(Text(line, style="bold"))  # Text: "[lo, hi]" is no markup tag
            if self.kind == "grid" and any(r.speculative for r in rows) and not speedups:
                console.print("no speculative point has a baseline (drafter=none) in this sweep: no speedups")
        with self._writing():
            self._write_record("interrupted" if interrupted else "failed" if self.disk_error else "finished")
        failed = any(not r.ok for r in rows) or self.disk_error is not None
        status = "KILLED" if interrupted else ("FAILED" if failed else "FINISHED")
        if self.disk_error is not None:
            console.print(f"[red]the sweep's folder is incomplete[/red]: {self.disk_error}", soft_wrap=True)
        files = [self.sweep_dir / n for n in ("summary.csv", "verdict.txt", "multirun.yaml")]
        files += [*(extra_files or []), *plots, *phased]
        with self._writing():  # the verdict, table and figures in one page that opens offline
            files.append(write_report(self.sweep_dir, rows, words, self.settings, cross, files))
        self._publish(rows, speedups, cross, words, extra_metrics or {}, files, status)
        on_disk = [r for r in rows if r.job_dir and r.status != "dry_run"]
        self.untracked |= self.tracking.enabled and any(r.run_id is None for r in on_disk)
        if self.untracked:
            hint = tracking.SYNC_HINT.format(folder=self.sweep_dir)
            console.print(f"[red]not everything reached MLflow[/red]: results in {self.sweep_dir}", soft_wrap=True)
            console.print(f"upload them later with: {hint}", soft_wrap=True)
        elif self.parent_id is not None and show:
            exp_id = tracking.client(self.tracking).get_run(self.parent_id).info.experiment_id
            lines = link_lines("in MLflow", tracking.ui_hint(self.tracking, exp_id, self.parent_id))
            if self.view is not None:
                lines += link_lines(
                    "its points, their metrics as columns", tracking.ui_url(self.tracking, exp_id, view=self.view)
                )
            for line in lines:
                console.print(line, soft_wrap=True, markup=False)

    def _save_view(self, mlflow: MlflowClient, rows: Sequence[PointResult]) -> str:
        """The points' view of MLflow's runs table: what sets them apart (the swept keys, a study's
        tuned ones and trial) and the console table's metrics as columns."""
        names = {k for r in rows for k in r.params}
        keys = [k if k in names else f"{k}.name" for k in dict.fromkeys([*self.swept, *self.settings])]
        run = mlflow.get_run(self.parent_id)
        return tracking.save_points_view(
            mlflow,
            run.info.experiment_id,
            self.sweep_id,
            f"points of {run.info.run_name}",
            params=[k for k in keys if k in names],
            metrics=table_keys(summary_rows(rows, self.settings)),
            tags=[TRIAL] if any(TRIAL in r.tags for r in rows) else [],
        )

    def _write(
        self, rows: Sequence[PointResult], answer: Sequence[str]
    ) -> tuple[dict[int, dict[str, float]], dict[str, float], list[str]]:
        analysis = apply(rows)
        table = summary_rows(rows, self.settings)
        words = [*verdicts(rows, analysis), *answer]
        with self._writing():
            if table:
                with atomic.replacing(self.sweep_dir / "summary.csv") as tmp:
                    write_csv(tmp, table)
            atomic.write_text(self.sweep_dir / "verdict.txt", "\n".join(words) + "\n")
        return analysis.speedups, analysis.crossovers, words

    def _publish(
        self,
        rows: Sequence[PointResult],
        speedups: dict[int, dict[str, float]],
        cross: dict[str, float],
        words: list[str],
        extra_metrics: dict[str, float],
        files: list[Path],
        status: str | None,
    ) -> None:
        if self.parent_id is None:
            return
        try:
            mlflow = tracking.client(self.tracking)
            for i, ratios in speedups.items():
                if rows[i].run_id:
                    method = {k: v for k, v in rows[i].tags.items() if k == METHOD_TAG}  # paired | unpaired
                    tracking.log_values(mlflow, rows[i].run_id, metrics=ratios, tags=method, changed_only=True)
            failed = sum(not r.ok for r in rows)
            summary = {**cross, **extra_metrics, "points": len(rows), "points_failed": failed}
            tags = {"mlflow.note.content": description(rows, words, self.settings)}
            if self.disk_error is not None:
                tags[ERROR_TAG] = self.disk_error
            tracking.log_values(mlflow, self.parent_id, metrics=summary, tags=tags, changed_only=True)
            for path in files:
                if path.exists():
                    in_plots = path.parent == self.sweep_dir / "plots"
                    mlflow.log_artifact(self.parent_id, str(path), artifact_path="plots" if in_plots else None)
            if status is not None:
                self.view = self._save_view(mlflow, rows)
                mlflow.set_terminated(self.parent_id, status)
        except Exception as exc:
            self.untracked = True
            log.error(
                "MLflow sweep logging failed (%s); the summary is in %s", tracking.store_message(exc), self.sweep_dir
            )
