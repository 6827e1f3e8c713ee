"""The adaptive break-even search on the live reference engine: one search, resumed, run once for
the module and read by several tests (its points, its two server launches across several launcher
jobs, its answer on the parent run, resuming); the map at three lengths; refusals before any server.
Where the search measures next and when it stops is tried on synthetic curves in
tests/unit/test_crossover.py."""

from __future__ import annotations

import csv
from dataclasses import dataclass

import pytest

from tests import conftest

pytestmark = pytest.mark.slow
# the search and its resume run in the setup of whichever test reads them first: two invocations of
# up to 900 s each (the single test they were took past pytest's 600 s at load 11-18 on two cores)
reads_the_search = pytest.mark.timeout(1800)

# batch 1 pays and batch 32 loses on the reference engine (README, "How often the verdict agrees"),
# so the search goes on past the ends; 64 prompts per window keep batch 32 busy and short
SEARCH = ["+sweep=crossover", "drafter=tiny", "hydra.sweeper.crossover.batch_max=32", "workload.num_prompts=64"]


def _parent_and_children(runs):
    parents = [r for r in runs if r.data.tags.get("specexp.role") == "parent"]
    return parents, [r for r in runs if r.data.tags.get("specexp.role") != "parent"]


@dataclass
class Searched:
    """The search with a budget of 3 batches (what it left, read before the rerun), and the same
    sweep folder again with a budget of 4 (as resume=<id> continues it)."""

    run: conftest.Run
    search: dict[str, str]  # crossover.csv's row after the first run
    rows: list[dict[str, str]]  # summary.csv after the first run
    groups: int  # launcher jobs after the first run
    runs: list  # MLflow runs after the first run
    verdict: str
    again: conftest.Run


@pytest.fixture(scope="module")
def searched(tmp_path_factory, shared_outputs, mlflow_template) -> Searched:
    specexp = conftest.specexp_runner(tmp_path_factory.mktemp("search"), shared_outputs, mlflow_template)
    run = specexp(*SEARCH, "hydra.sweeper.crossover.max_points=3", "-m", timeout=900)
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    folder = run.workdir / "multirun"
    (search,) = csv.DictReader((folder / "crossover.csv").open())
    rows = list(csv.DictReader((folder / "summary.csv").open()))
    groups = len([p for p in (folder / "groups").iterdir() if p.name.isdigit()])
    verdict = (folder / "verdict.txt").read_text()
    runs = run.runs()
    again = specexp(*SEARCH, "hydra.sweeper.crossover.max_points=4", "-m", timeout=900)
    assert again.proc.returncode == 0, again.proc.stderr[-3000:]
    return Searched(run, search, rows, groups, runs, verdict, again)


def measured(search: dict[str, str]) -> list[int]:
    return [int(b) for b in search["measured"].split()]


@reads_the_search
def test_search_measures_past_the_ends_until_the_budget(searched: Searched) -> None:
    search = searched.search
    assert search["status"] == "budget" and len(measured(search)) == 3 and {1, 32} <= set(measured(search))
    assert search["grid_batches"] == "32"
    # both arms at every batch
    assert sorted(int(r["batch"]) for r in searched.rows) == sorted(measured(search) * 2)


@reads_the_search
def test_search_runs_on_two_server_launches_across_launcher_jobs(searched: Searched) -> None:
    assert searched.groups == 2  # the ends, then the third batch: two launcher jobs
    _, children = _parent_and_children(searched.runs)
    assert sum(c.data.tags["specexp.server_reused"] == "false" for c in children) == 2  # servers stayed up


@reads_the_search
def test_search_answers_on_the_parent_run_and_in_the_verdict(searched: Searched) -> None:
    (parent,), _ = _parent_and_children(searched.runs)
    assert parent.data.metrics["crossover.batches"] == 3 and parent.data.metrics["crossover.points"] == 6
    assert parent.data.metrics["crossover.grid_batches"] == 32
    verdict = searched.verdict
    assert "when the budget ran out" in verdict and "3 of 32 batches measured (6 points)" in verdict


@reads_the_search
def test_the_same_sweep_folder_again_continues_the_search(searched: Searched) -> None:
    folder = searched.again.workdir / "multirun"
    (search,) = csv.DictReader((folder / "crossover.csv").open())
    assert set(measured(searched.search)) < set(measured(search))
    rows = list(csv.DictReader((folder / "summary.csv").open()))
    assert len(rows) == 2 * int(search["batches"]) <= 8  # the first three batches were not measured again


def test_map_at_three_lengths_in_one_command(specexp) -> None:
    run = specexp(
        "+sweep=crossover_map",
        "drafter=tiny",
        "hydra.sweeper.crossover.batch_max=8",
        "hydra.sweeper.crossover.max_points=3",
        "hydra.sweeper.crossover.input_lens=[16,64,128]",
        "-m",
        timeout=900,
    )
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    folder = run.workdir / "multirun"
    searches = list(csv.DictReader((folder / "crossover.csv").open()))
    assert [s["input_len"] for s in searches] == ["16", "64", "128"]
    rows = list(csv.DictReader((folder / "summary.csv").open()))
    assert len(rows) == 2 * sum(int(s["batches"]) for s in searches)  # one row per measured point
    for s in searches:  # each row names its context length: the map's rows are the csv's
        mine = [r for r in rows if r["workload.input_len"] == s["input_len"]]
        assert sorted({int(r["batch"]) for r in mine}) == sorted(int(b) for b in s["measured"].split())
        assert sorted(r["drafter.name"] for r in mine) == sorted(["none", "tiny"] * int(s["batches"]))
    assert (folder / "plots" / "crossover_map.png").stat().st_size > 10_000
    parents, children = _parent_and_children(run.runs())
    assert sum(c.data.tags["specexp.server_reused"] == "false" for c in children) == 2
    artifacts = {a.path for a in run.mlflow.list_artifacts(parents[0].info.run_id)}
    assert any("crossover_map" in a or a == "plots" for a in artifacts), artifacts


def test_bad_search_settings_stop_before_any_server(specexp) -> None:
    run = specexp("+sweep=crossover", "drafter=tiny", "hydra.sweeper.crossover.batch_max=1", "-m")
    assert run.proc.returncode == 2, run.proc.stderr[-2000:]
    assert "hydra.sweeper.crossover.batch_max" in run.proc.stdout + run.proc.stderr
    run = specexp("+sweep=crossover", "drafter=none", "-m")
    assert run.proc.returncode == 2
    assert "drafter: none does not speculate. Fix: name the drafter" in run.proc.stdout + run.proc.stderr


def test_dataset_length_buckets_are_planned_and_an_empty_one_is_refused(specexp) -> None:
    """input_lens as length buckets of a dataset (humaneval under the tiny model's tokenizer): each
    search's points pick the prompts of their bucket; a bucket no prompt falls in, or buckets for
    random prompts, stop the sweep with one line before any server starts."""
    common = ["+sweep=crossover_map", "drafter=tiny", "workload=humaneval"]
    run = specexp(*common, "hydra.sweeper.crossover.input_lens=[0-110,110-200,200-600]", "dry_run=true", "-m")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    for bucket in ("0-110", "110-200", "200-600"):
        assert f"drafter=tiny batch=64 workload.length_bucket={bucket}" in run.proc.stdout + run.proc.stderr
    run = specexp(*common, "hydra.sweeper.crossover.input_lens=[0-110,5000-6000]", "-m")
    out = run.proc.stdout + run.proc.stderr
    assert run.proc.returncode == 2 and "workload.length_bucket: no conversation of humaneval" in out, out[-2000:]
    servers = run.workdir / "outputs" / "servers"
    assert "5000-6000 tokens" in out and not (servers.exists() and any(servers.iterdir()))  # none started
    run = specexp("+sweep=crossover_map", "drafter=tiny", "hydra.sweeper.crossover.input_lens=[0-110,110-200]", "-m")
    assert run.proc.returncode == 2
    assert (
        "hydra.sweeper.crossover.input_lens: length buckets pick a dataset's prompts"
        in run.proc.stdout + run.proc.stderr
    )
