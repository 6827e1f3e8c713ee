"""The loop closed on the live reference engine: a depth x batch sweep writes schedule.json, a bad
schedule fails before any server, and validate_schedule runs the schedule against its static depths."""

import json
import re

import pytest

from tests.conftest import engine_processes


def parent_of(run):
    (parent,) = [r for r in run.runs() if r.data.tags.get("specexp.role") == "parent"]
    return parent


def test_a_depth_by_batch_grid_writes_a_deployable_schedule(specexp) -> None:
    run = specexp("drafter=tiny", "drafter.num_steps=1,2", "batch=1,2", "-m")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    path = run.workdir / "multirun" / "schedule.json"
    data = json.loads(path.read_text())
    assert data["schedule"][0][0] == 1 and data["schedule"][-1][1] == 2
    assert set(data["per_batch"]["1"]["depths"]) == {"0", "1", "2"}  # the added baseline is depth 0
    for batch in data["per_batch"].values():  # every depth against the best says how its ratio was made
        compared = [d["ratio_to_best"] for depth, d in batch["depths"].items() if int(depth) != batch["best"]]
        assert len(compared) == 2 and {c["method"] for c in compared} <= {"paired", "unpaired"}
    verdict = (run.workdir / "multirun" / "verdict.txt").read_text()
    assert f"depth schedule for output_throughput ({path}): batch 1" in verdict and "batch 1" in run.proc.stderr
    if data["override"]:  # the tiny drafter on two noisy cores may or may not pay
        assert f"use it: {data['override']}" in verdict and "num_speculative_tokens_per_batch_size" in verdict
    else:
        assert "speculation pays at no measured batch: serve drafter=none" in verdict
    artifacts = [a.path for a in run.mlflow.list_artifacts(parent_of(run).info.run_id)]
    assert "schedule.json" in artifacts


def test_a_bad_schedule_fails_in_one_line_before_any_server(specexp) -> None:
    run = specexp("drafter=tiny", "batch=4", "drafter.schedule=[[1,2,3],[4,4,1]]")
    assert run.proc.returncode == 2
    assert "drafter.schedule: range [4, 4, 1] starts at batch 4: a gap after batch 2" in run.proc.stderr
    assert not engine_processes(str(run.workdir))


@pytest.mark.slow  # eight points, four servers taking turns: a minute or two on two cores
def test_validate_schedule_runs_each_arm_and_judges_the_schedule(specexp, tmp_path) -> None:
    schedule = tmp_path / "schedule.json"
    schedule.write_text(json.dumps({"schedule": [[1, 1, 2], [2, 2, 1]]}))
    run = specexp("drafter=tiny", f"drafter.schedule={schedule}", "+sweep=validate_schedule", "-m")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    points = [json.loads(p.read_text()) for p in (run.workdir / "multirun").glob("*/results.json")]
    arms = {
        (p["params"]["drafter.name"], str(p["params"].get("drafter.fixed_depth")), p["params"]["drafter.num_steps"])
        for p in points
    }
    # each arm records the most it drafts: none 0, the fixed depths theirs, the schedule its largest
    assert arms == {("none", "None", 0), ("tiny", "None", 2), ("tiny", "1", 1), ("tiny", "2", 2)}
    assert sorted(p["params"]["batch"] for p in points) == [1] * 4 + [2] * 4
    argvs = [json.loads(p.read_text())["argv"] for p in (run.workdir / "multirun").glob("*/server.json")]
    assert ["--schedule", "[[1, 1, 2], [2, 2, 1]]"] in [
        a[a.index("--schedule") : a.index("--schedule") + 2] for a in argvs if "--schedule" in a
    ]
    header = (run.workdir / "multirun" / "summary.csv").read_text().splitlines()[0]
    assert "drafter.fixed_depth" in header.split(",")  # the table tells the schedule from its fixed depths
    verdict = (run.workdir / "multirun" / "verdict.txt").read_text()
    assert "schedule drafter.schedule=[[1,1,2],[2,2,1]] against the best static depth:" in verdict
    assert "batch 1: the schedule (depth 2)" in verdict and "batch 2: the schedule (depth 1)" in verdict
    assert re.search(r"batch 1: .* ratio [0-9.]+ \[[0-9.]+, [0-9.]+\] (un)?paired, ", verdict), verdict
    # at batch 2 a request that ends leaves one running until its replacement arrives: those steps
    # draft the depth of batch 1's range (2), which the static depth-1 arm never does
    per_draft = {
        str(p["params"].get("drafter.fixed_depth")): p["metrics"]["spec_draft_tokens"]
        / p["metrics"]["spec_verify_steps"]
        for p in points
        if p["params"]["batch"] == 2 and p["params"]["drafter.name"] == "tiny"
    }
    assert per_draft["1"] <= 1.0 < 1.02 * per_draft["1"] < per_draft["None"], per_draft
    (at2,) = [line for line in verdict.splitlines() if line.startswith("batch 2: the schedule")]
    assert f"it drafted {per_draft['None']:.2f} tokens per draft against static depth 1's" in at2, at2
