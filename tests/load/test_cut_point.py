"""A whole point (the app, in process) against an endpoint whose streams are not whole or name another
model than it serves (tests.load.endpoint): never recorded ok, and said so (issue 37)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Run
from tests.load.endpoint import SERVED, Endpoint, serving
from tests.support import store

EXTERNAL = ["engine=external", f"engine.model_name={SERVED}", "engine.flavor=openai", "drafter=none", "batch=2"]


def point_files(run: Run) -> tuple[dict, list[dict]]:
    """The single run's results.json and records.jsonl."""
    (results,) = (run.workdir / "run").rglob("results.json")
    records = [json.loads(line) for line in (results.parent / "records.jsonl").read_text().splitlines()]
    return json.loads(results.read_text()), records


def test_a_point_whose_streams_are_cut_half_way_fails_naming_why(specexp_main: Callable[..., Run]) -> None:
    # issue 37: Connection: close after half of the 16 forced tokens was status=ok, output_len_mean 8
    with serving(Endpoint(tokens=8, close=True)) as url:
        run = specexp_main(*EXTERNAL, f"engine.url={url}", "tracking.enabled=false")
    assert run.proc.returncode == 1, run.proc.lines  # a single run whose point failed
    results, records = point_files(run)
    reason = "stream ended without [DONE] after 8 of 16 tokens"
    assert results["status"] == "failed" and reason in results["error"]
    own = [r for r in records if not r["filler"]]  # a filler may be cut at the window's end first
    assert own and {r["error"] for r in own} == {reason} and all(r["finish_reason"] is None for r in records)


def test_streams_naming_another_model_tag_the_point_in_results_and_mlflow(
    specexp_main: Callable[..., Run], tmp_path: Path, mlflow_template: Path
) -> None:
    store.place(mlflow_template, tmp_path / "mlflow.db")  # specexp_main's store, migrated once per session
    with serving(Endpoint(model="someone-else")) as url:
        run = specexp_main(*EXTERNAL, f"engine.url={url}")
    results, records = point_files(run)
    assert results["status"] == "ok" and all(r["finish_reason"] == "length" for r in records if not r["filler"])
    tags = {"specexp.model_mismatch": "true", "specexp.streamed_model": "someone-else"}
    assert tags.items() <= results["tags"].items()
    (logged,) = run.runs()
    assert tags.items() <= logged.data.tags.items()
    warned = [line for line in run.proc.lines if "named model someone-else" in line]
    assert len(warned) == 1, run.proc.lines
