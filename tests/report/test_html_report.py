"""report.html, the sweep's page: written by the recorder beside summary.csv, from hand-made points
(no server): the verdict before the table, intervals as [lo, hi], figures that open offline, the
settings that differ, the failures and their reasons, each point's folder and MLflow run."""

from __future__ import annotations

import re
from pathlib import Path

from specexp import tracking
from specexp.config import TrackingConfig
from specexp.report.html_report import REPORT, differing, page
from specexp.result import PointResult
from specexp.sweep.recorder import SweepRecorder

SPEEDUPS = {1: 2.0, 4: 1.2, 16: 0.5}
FAILURE = "the server exited with code 1 before it was ready: out of memory (see server.log)"


def point(drafter: str, batch: int, tput: float, folder: Path, status: str = "ok") -> PointResult:
    metrics = {"output_throughput": tput, "output_throughput_ci95": 0.05 * tput, "windows": 5}
    metrics["accept_length"] = 1.0 if drafter == "none" else 3.0
    params = {"engine.name": "torch", "model.name": "tiny", "drafter.name": drafter, "batch": batch}
    params["drafter.num_steps"] = 0 if drafter == "none" else 4
    folder.mkdir(parents=True, exist_ok=True)
    error = FAILURE if status != "ok" else None
    return PointResult.from_params(status, params, metrics=metrics, job_dir=str(folder), error=error)


def points(sweep_dir: Path) -> list[PointResult]:
    rows = [point("none", b, 100.0 * b, sweep_dir / str(i)) for i, b in enumerate(SPEEDUPS)]
    rows += [point("tiny", b, 100.0 * b * s, sweep_dir / str(i + 3)) for i, (b, s) in enumerate(SPEEDUPS.items())]
    return [*rows, point("tiny", 32, 1.0, sweep_dir / "6", status="failed")]


def finished_sweep(sweep_dir: Path, cfg: TrackingConfig | None = None, kind: str = "grid") -> SweepRecorder:
    """A sweep's folder as the recorder leaves it at the end: summary.csv, plots, report.html."""
    cfg = cfg or TrackingConfig(enabled=False)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    name = "torch/tiny: drafter none,tiny × batch 1–16"
    recorder = SweepRecorder.start(cfg, sweep_dir.parent, "2026-12-03_10-00-00-abcdef", sweep_dir, kind, name, {})
    recorder.finish(points(sweep_dir), interrupted=False)
    return recorder


def test_a_finished_sweep_writes_its_page_beside_its_summary(tmp_path: Path, capsys) -> None:
    sweep_dir = tmp_path / "sweep"
    finished_sweep(sweep_dir)
    printed = " ".join(capsys.readouterr().err.split())
    assert "95% CI [lo, hi]: speedups" in printed  # the verdict's methods line, printed as written (no markup)
    assert (sweep_dir / "summary.csv").is_file()
    text = (sweep_dir / REPORT).read_text(encoding="utf-8")
    assert "<title>Sweep 2026-12-03_10-00-00-abcdef: torch/tiny: drafter none,tiny × batch 1–16</title>" in text
    verdict = text.index('id="verdict"')
    assert verdict < text.index('id="points-table"') < text.index('id="figures"')  # the answer first
    assert re.search(r"<li>tiny pays up to batch 4 \(×1\.20 \[\d\.\d\d, \d\.\d\d\]\)", text[verdict:])
    assert '1,600<span class="ci">[1,520, 1,680]</span>' in text  # the interval beneath its value
    assert "<script src=" not in text and text.count("plotly.js v") == 1  # inlined once: opens offline
    assert text.count('class="plotly-graph-div"') == 3  # throughput, speedup, accept length
    failures = text[text.index('id="failures"') :]
    assert '<a href="6/">torch/tiny, 32: failed</a>' in failures and FAILURE in failures
    assert '<td><a href="3/">3</a></td>' in text  # each point's folder, relative: it moves with the sweep


def test_the_settings_that_differ_between_points(tmp_path: Path) -> None:
    found = differing(points(tmp_path))
    assert found == {"batch": ["1", "4", "16", "32"], "drafter.name": ["none", "tiny"], "drafter.num_steps": ["0", "4"]}


def test_a_study_embeds_its_figures_and_each_point_links_its_mlflow_run(tmp_path: Path, mlflow_template: Path) -> None:
    from tests.support.store import place

    uri = f"sqlite:///{place(mlflow_template, tmp_path / 'mlflow.db')}"
    cfg = TrackingConfig(uri=uri)
    sweep_dir = tmp_path / "study"
    (sweep_dir / "plots").mkdir(parents=True)
    recorder = SweepRecorder.start(cfg, tmp_path, "s1", sweep_dir, "study", "a study", {})
    mlflow = tracking.client(cfg)
    exp_id = mlflow.get_run(recorder.parent_id).info.experiment_id
    rows = points(sweep_dir)[:2]
    for row in rows:
        row.run_id = mlflow.create_run(exp_id).info.run_id
    depth = sweep_dir / "plots" / "study_depth.png"
    depth.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)  # the tuner's figure: a PNG with no interactive twin
    recorder.finish(rows, interrupted=False, extra_files=[depth], show=False)
    text = (sweep_dir / REPORT).read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<title>Study s1: a study</title>" in text
    assert 'src="data:image/png;base64,iVBORw0KGgo' in text and "plotly.js v" not in text
    for row in rows:
        assert f'<a href="{tracking.ui_url(cfg, exp_id, row.run_id)}">run</a>' in text
    assert f'<a href="{tracking.ui_url(cfg, exp_id, recorder.parent_id)}">' in text  # the parent, at the top
    logged = {a.path for a in mlflow.list_artifacts(recorder.parent_id)}
    assert REPORT in logged  # beside summary.csv on the parent run too


def test_a_sweep_without_a_verdict_says_why() -> None:
    text = page("t", [], [], [], [], Path("."))
    assert "No verdict: no speculative point has a baseline" in text and "No figure" in text
