"""``python -m specexp.report`` against a real MLflow sqlite store filled through specexp.tracking."""

from __future__ import annotations

from pathlib import Path

import pytest

from specexp import tracking
from specexp.config import TrackingConfig
from specexp.report.__main__ import main
from specexp.sweep.folder import write_record

SPEEDUPS = {1: 2.0, 2: 1.5, 4: 1.2, 8: 0.8, 16: 0.5}


def log_sweep(cfg: TrackingConfig, outputs: Path, sweep_id: str, nccl: str, scale: float, failed: bool = False) -> str:
    """Baseline and drafter at five batches; ``scale`` multiplies throughput and divides latency."""
    parent = tracking.start_parent(cfg, outputs, sweep_id, f"sweep-{sweep_id}", {})
    for drafter in ("none", "tiny"):
        for batch, speedup in SPEEDUPS.items():
            tput = 100.0 * batch * (1.0 if drafter == "none" else speedup) * scale
            status = "failed" if failed and drafter == "tiny" and batch == 16 else "ok"
            metrics = (
                {}
                if status == "failed"
                else {
                    "output_throughput": tput,
                    "decode_speed": tput / batch,
                    "accept_length": 1.0 if drafter == "none" else 3.0,
                    "ttft_ms_p50": 10.0 * batch / scale,
                    "tpot_ms_p50": 4.0 / scale,
                }
            )
            params = {
                "engine.name": "torch",
                "model.name": "tiny",
                "drafter.name": drafter,
                "drafter.num_steps": 0 if drafter == "none" else 4,
                "nccl.name": nccl,
                "batch": batch,
                "sweep_id": sweep_id,
                "max_batch": 16,
            }
            tags = {"specexp.sweep_id": sweep_id, "specexp.status": status}
            tracking.log_point(cfg, outputs, f"{drafter}-b{batch}", metrics, params, tags, [], "FINISHED", sweep_id)
    tracking.log_values(tracking.client(cfg), parent, metrics={"crossover_batch.tiny": 2**2.5})
    return parent


def log_study(cfg: TrackingConfig, outputs: Path, sweep_id: str) -> None:
    """A depth study at batch 4: three trials, the fastest of them past a constraint (infeasible)."""
    tags = {"specexp.kind": "study"}
    parent = tracking.start_parent(cfg, outputs, sweep_id, f"torch/tiny: study {sweep_id}", tags)
    params = {"swept.drafter.num_steps": "range(1, 9)", "study.objective": "output_throughput"}
    tracking.log_values(tracking.client(cfg), parent, params={**params, "study.direction": "maximize"})
    for trial, (steps, tput, ok) in enumerate([(1, 200.0, True), (3, 300.0, True), (8, 900.0, False)]):
        params = {"engine.name": "torch", "model.name": "tiny", "drafter.name": "tiny", "batch": 4}
        params |= {"drafter.num_steps": steps, "sweep_id": sweep_id}
        tags = {"specexp.sweep_id": sweep_id, "specexp.status": "ok"}
        tags |= {"optuna.trial": str(trial), "optuna.feasible": str(ok).lower()}
        metrics = {"output_throughput": tput}
        tracking.log_point(cfg, outputs, f"trial {trial}", metrics, params, tags, [], "FINISHED", sweep_id)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    outputs = tmp_path_factory.mktemp("outputs")
    cfg = TrackingConfig(uri=f"sqlite:///{outputs / 'mlflow.db'}", experiment="specexp")
    parent_a = log_sweep(cfg, outputs, "sweep-a", "default", 1.0)
    log_sweep(cfg, outputs, "sweep-b", "pcie", 1.1, failed=True)
    log_study(cfg, outputs, "study-c")  # the newest: "latest" means it, of either kind
    return {"uri": cfg.uri, "parent_a": parent_a}


def parse(markdown: str) -> dict[tuple[str, str], dict[str, str]]:
    """The first markdown table as {(config, batch): {header: cell}}."""
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    split = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    headers, body = split[0], split[2:]
    return {(cells[0], cells[1]): dict(zip(headers, cells, strict=True)) for cells in body}


def run(store: dict[str, str], capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["--tracking-uri", store["uri"], *argv]) == 0
    return capsys.readouterr().out


def test_report_table_verdict_and_files(store: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(store, capsys, "sweep-a", "--out", str(tmp_path))
    table = parse(out)
    assert len(table) == 10
    tiny4, none4 = table[("torch/tiny", "4")], table[("torch/none", "4")]
    assert tiny4["output tok/s"] == "480.0"
    assert tiny4["stream tok/s"] == "120.0"
    assert tiny4["speedup"] == "1.20"  # recomputed from the points
    assert tiny4["accept len"] == "3.00"
    assert tiny4["TTFT p50 ms"] == "40.0"
    assert tiny4["status"] == "ok"
    assert none4["speedup"] == "-" and none4["output tok/s"] == "400.0"
    assert "tiny pays up to batch 4 (×1.20), loses from batch 8 (×0.80); break-even ≈ 5.7" in out
    assert (tmp_path / "report.md").read_text(encoding="utf-8") == out.rstrip("\n") + "\n"
    assert {"summary.csv", "plots.html", "speedup.png", "output_throughput.png"} <= {p.name for p in tmp_path.iterdir()}
    assert "![speedup](speedup.png)" in out


def test_sweep_named_by_run_name_run_id_or_latest(store: dict, tmp_path: Path, capsys) -> None:
    for ref in ("sweep-sweep-a", store["parent_a"]):
        assert "# Sweep sweep-a" in run(store, capsys, ref, "--out", str(tmp_path), "--no-plots")
    assert "# Study study-c" in run(store, capsys, "--out", str(tmp_path), "--no-plots")  # the newest, a study
    failed = parse(run(store, capsys, "sweep-b", "--out", str(tmp_path), "--no-plots"))[("torch/tiny", "16")]
    assert failed["status"] == "failed" and failed["output tok/s"] == "-"
    assert "10 points, 1 failed" in run(store, capsys, "sweep-b", "--out", str(tmp_path), "--no-plots")


def test_a_study_reports_its_best_depth_per_batch(store: dict, tmp_path: Path, capsys) -> None:
    out = run(store, capsys, "study-c", "--out", str(tmp_path))
    assert "# Study study-c: torch/tiny: study study-c" in out
    assert "best at batch 4: drafter.num_steps=3 (output_throughput 300.0, trial 1)" in out  # not the infeasible 8
    assert "| config | trial | drafter.num_steps | batch |" in out  # the trial and the tuned parameter are columns
    # the depth on the x axis (not every depth stacked at "batch 4"); no batch-axis figures for a study
    assert [p.name for p in tmp_path.glob("*.png")] == ["study_depth.png"] and "![study_depth]" in out


def test_compare_two_sweeps_point_by_point(store: dict, tmp_path: Path, capsys) -> None:
    out = run(store, capsys, "--compare", "sweep-a", "sweep-b", "--out", str(tmp_path))
    assert "- `nccl.name`: default → pcie" in out
    table = parse(out)
    assert len(table) == 11  # ten points and the geomean
    tiny4 = table[("torch/tiny", "4")]
    assert tiny4["A output tok/s"] == "480.0" and tiny4["B output tok/s"] == "528.0"
    assert tiny4["output tok/s B/A"] == "1.100"
    assert tiny4["stream tok/s B/A"] == "1.100"
    assert tiny4["accept len B/A"] == "1.000"
    assert tiny4["TTFT p50 ms B/A"] == "0.909"
    assert tiny4["TPOT p50 ms B/A"] == "0.909"
    assert table[("torch/tiny", "16")]["output tok/s B/A"] == "-"  # failed in B
    assert table[("geomean", "")]["output tok/s B/A"] == "1.100"
    assert (tmp_path / "compare.md").exists()


def test_unknown_sweep_or_store_exits_with_a_message(store: dict, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no sweep matches 'nope'"):
        main(["--tracking-uri", store["uri"], "nope", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="no MLflow store"):
        main(["--tracking-uri", f"sqlite:///{tmp_path / 'absent.db'}"])
    assert not (tmp_path / "absent.db").exists()


def test_help_names_the_ways_to_pick_a_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--compare A B" in capsys.readouterr().out


def sweep_folder(root: Path, name: str, record: dict) -> Path:
    """A sweep's or study's folder as the sweep leaves it: its record, sweep.json."""
    folder = root / "multirun" / name
    folder.mkdir(parents=True)
    write_record(folder, record)
    return folder


def test_a_sweep_or_study_named_by_its_folder(store: dict, tmp_path: Path, capsys) -> None:
    tracking = {"uri": store["uri"], "experiment": "specexp"}
    sweep = sweep_folder(tmp_path, "sweep-a", {"sweep_id": "sweep-a", "kind": "grid", "tracking": tracking})
    # the store is the folder's own: no --tracking-uri needed
    assert main([str(sweep), "--out", str(tmp_path / "a"), "--no-plots"]) == 0
    assert "# Sweep sweep-a" in capsys.readouterr().out
    study = sweep_folder(tmp_path, "renamed", {"sweep_id": "study-c", "kind": "study", "tracking": tracking})
    assert "# Study study-c" in run(store, capsys, str(study), "--out", str(tmp_path / "c"), "--no-plots")
    out = run(store, capsys, "--compare", str(sweep), "sweep-b", "--out", str(tmp_path / "ab"))
    assert "- `nccl.name`: default → pcie" in out


def test_a_folder_that_holds_no_sweep_says_so(store: dict, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--tracking-uri", store["uri"], str(tmp_path)])
    assert str(exited.value) == (
        f"{tmp_path}: no sweep.json in this folder, so it is no sweep's or study's folder; "
        "give one under outputs/multirun, or a sweep id"
    )
