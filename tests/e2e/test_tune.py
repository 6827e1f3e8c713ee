"""The Optuna sweeper on the live reference engine: the same best depth as a grid, resumable
studies another process can open, infeasible trials never launched, failed trials recorded."""

import csv
import re
import subprocess
import sys

import optuna
import pytest

# Deterministic objective: the same prompts in every trial (unique=false) and greedy decoding make
# acceptance a pure function of the depth, so a study and a grid can be compared exactly.
DEPTH_STUDY = [
    "drafter=tiny",
    "workload.unique=false",
    "workload.output_len=24",
    "hydra.sweeper.mode=optuna",
    "hydra.sweeper.objective=accept_length",
    "hydra.sweeper.constraints=['accept_rate >= 0.5']",
    "drafter.num_steps=range(1,9)",
]


def best(sweep_dir) -> dict:
    (row,) = csv.DictReader((sweep_dir / "best.csv").open())
    return row


@pytest.mark.timeout(1800)
def test_tpe_in_12_trials_finds_the_grids_best_depth(specexp) -> None:
    grid = specexp(
        *DEPTH_STUDY,
        "hydra.sweeper.sampler=grid",
        "hydra.sweeper.n_trials=8",
        "hydra.sweeper.study_name=grid",
        "-m",
        timeout=900,
    )
    assert grid.proc.returncode == 0, grid.proc.stderr[-3000:]
    grid_best = best(grid.workdir / "multirun")
    (grid.workdir / "multirun").rename(grid.workdir / "grid")
    tpe = specexp(
        *DEPTH_STUDY,
        "hydra.sweeper.sampler=tpe",
        "hydra.sweeper.n_trials=12",
        "hydra.sweeper.study_name=tpe",
        "-m",
        timeout=900,
    )
    assert tpe.proc.returncode == 0, tpe.proc.stderr[-3000:]
    tpe_best = best(tpe.workdir / "multirun")
    print(
        f"grid: best num_steps={grid_best['drafter.num_steps']} at trial {grid_best['trial']} of 8; "
        f"tpe: best num_steps={tpe_best['drafter.num_steps']} at trial {tpe_best['trial']} of 12"
    )
    assert tpe_best["drafter.num_steps"] == grid_best["drafter.num_steps"]
    # a deterministic objective: every configuration measured once, however often TPE suggests it
    trials = list(csv.DictReader((tpe.workdir / "multirun" / "trials.csv").open()))
    measured = [r for r in tpe.runs() if r.data.tags.get("optuna.study") == "tpe"]  # the grid shares the store
    assert len(measured) == len({t["drafter.num_steps"] for t in trials if t["state"] == "COMPLETE"}) < len(trials)
    assert all(float(t["accept_length_ci95"]) == 0.0 for t in trials if t["state"] == "COMPLETE")
    assert float(tpe_best["value"]) == float(grid_best["value"])
    assert 1 < int(grid_best["drafter.num_steps"]) < 8  # the constraint bites: not a corner of the space


def test_study_resumes_and_another_process_loads_it(specexp, tmp_path) -> None:
    journal = tmp_path / "study.log"
    common = [
        "drafter=tiny",
        "+sweep=tune_depth",
        f"hydra.sweeper.storage=journal://{journal}",
        "hydra.sweeper.study_name=resume",
        "hydra.sweeper.sampler=random",
    ]
    first = specexp(*common, "hydra.sweeper.n_trials=2", "-m")
    assert first.proc.returncode == 0, first.proc.stderr[-3000:]
    again = specexp(*common, "hydra.sweeper.n_trials=3", "-m")
    assert again.proc.returncode == 0, again.proc.stderr[-3000:]
    code = (
        "import optuna; from optuna.storages import JournalStorage; "
        "from optuna.storages.journal import JournalFileBackend; "
        f"backend = JournalFileBackend({str(journal)!r}); "
        "s = optuna.load_study(study_name='resume', storage=JournalStorage(backend)); "
        "print(sum(t.state.name in ('COMPLETE', 'FAIL') for t in s.trials))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == 3  # n_trials is the study's total: the rerun added one measured trial
    # one MLflow run per measured trial over both invocations (the store is shared); pruned ones have
    # none; the drafter=none baseline was measured once, by the first
    children = [r for r in again.runs() if r.data.tags.get("specexp.role") != "parent"]
    assert len([c for c in children if "optuna.trial" in c.data.tags]) == 3
    assert len([c for c in children if c.data.params["drafter.name"] == "none"]) == 1
    # what the user reads: the tuned parameters as columns, the best depth at the end, no library notes
    err = again.proc.stderr
    assert re.search(r"best at batch 1: drafter\.num_steps=\d", err), err[-3000:]
    assert "ExperimentalWarning" not in err and "low `target` values" not in err
    assert "no speculative point has a baseline" not in err
    parents = [r for r in again.runs() if r.data.tags.get("specexp.role") == "parent"]
    assert all("Optuna over drafter.num_steps" in p.info.run_name for p in parents)


def test_infeasible_depths_are_pruned_and_never_launched(specexp) -> None:
    run = specexp(
        "drafter=tiny",
        "hydra.sweeper.mode=optuna",
        "drafter.topk=choice(2,4)",
        "hydra.sweeper.sampler=grid",
        "hydra.sweeper.n_trials=1",
        "hydra.sweeper.study_name=infeasible",
        "-m",
    )
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    rows = list(csv.DictReader((run.workdir / "multirun" / "trials.csv").open()))
    assert [r["state"] for r in rows] == ["PRUNED", "PRUNED"]
    assert [r["feasible"] for r in rows] == ["False", "False"]  # refused by the engine: not feasible
    assert "drafter.topk" in run.proc.stderr  # the engine's reason, shown to the user
    assert [r for r in run.runs() if r.data.tags.get("specexp.role") != "parent"] == []


def test_failed_trial_is_recorded_and_the_study_goes_on(specexp, shared_outputs, broken_model) -> None:
    good = shared_outputs / "models" / "tiny" / "target"
    run = specexp(
        "drafter=none",
        "hydra.sweeper.mode=optuna",
        f"model.path=choice({good},{broken_model})",
        "hydra.sweeper.sampler=grid",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.study_name=fails",
        "engine.startup_timeout_s=60",
        "-m",
    )
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    states = [row["state"] for row in csv.DictReader((run.workdir / "multirun" / "trials.csv").open())]
    assert sorted(states) == ["COMPLETE", "FAIL"]
    children = [r for r in run.runs() if r.data.tags.get("specexp.role") != "parent"]
    assert {c.data.tags["optuna.trial"] for c in children} == {"0", "1"}
    (parent,) = [r for r in run.runs() if r.data.tags.get("specexp.role") == "parent"]
    assert parent.data.metrics["trials_complete"] == 1 and "best.output_throughput" in parent.data.metrics


def test_schedule_measures_every_batch_on_one_launch_per_trial(specexp) -> None:
    run = specexp(
        "drafter=tiny",
        "+sweep=tune_schedule",
        "hydra.sweeper.batches=[1,2]",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.study_name=schedule",
        "-m",
    )
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    rows = list(csv.DictReader((run.workdir / "multirun" / "best.csv").open()))
    assert [r["objective"] for r in rows] == ["output_throughput@b1", "output_throughput@b2"]
    children = [r for r in run.runs() if r.data.tags.get("optuna.trial") is not None]
    assert len(children) == 4
    assert sum(c.data.tags["specexp.server_reused"] == "false" for c in children) == 2
    baselines = [r for r in run.runs() if r.data.params.get("drafter.name") == "none"]
    assert sorted(b.data.params["batch"] for b in baselines) == ["1", "2"]  # one server, both batches
    assert optuna.__version__.startswith("5")


def test_the_depth_preset_on_a_chain_engine_reads_right(specexp) -> None:
    """tune_depth on the reference engine: depth only (no trial pruned for a top-k the engine
    refuses), a drafter=none baseline measured once so every trial has a speedup, the best stated
    with the configurations it cannot be told apart from, repeats pooled, a plot by depth."""
    run = specexp("drafter=tiny", "+sweep=tune_depth", "batch=2", "hydra.sweeper.n_trials=3", "-m", timeout=900)
    err = run.proc.stderr
    assert run.proc.returncode == 0, err[-3000:]
    assert "searching drafter.num_steps" in err and "infeasible" not in err
    rows = list(csv.DictReader((run.workdir / "multirun" / "trials.csv").open()))
    assert [r["state"] for r in rows] == ["COMPLETE"] * 3 and "drafter.topk" not in rows[0]
    children = [r for r in run.runs() if r.data.tags.get("specexp.role") != "parent"]
    baselines = [c for c in children if c.data.params["drafter.name"] == "none"]
    assert len(baselines) == 1 and baselines[0].data.params["batch"] == "2"
    trials = [c for c in children if c.data.params["drafter.name"] == "tiny"]
    assert len(trials) == 3 and all("speedup" in c.data.metrics for c in trials)
    verdict = (run.workdir / "multirun" / "verdict.txt").read_text()
    (line,) = [x for x in verdict.splitlines() if x.startswith("best at batch 2:")]
    assert line in err  # the console says what verdict.txt says
    (best_row,) = csv.DictReader((run.workdir / "multirun" / "best.csv").open())
    repeated = len(best_row["trials"].split()) > 1
    best_clause = line.split(";")[0]  # the indistinguishable ones may be pooled too: look at the best's own
    assert ("pooled" in best_clause) == repeated
    assert ("no single best" in line) == bool(best_row["indistinguishable"])
    (parent,) = [r for r in run.runs() if r.data.tags.get("specexp.role") == "parent"]
    assert line in parent.data.tags["mlflow.note.content"]
    assert (run.workdir / "multirun" / "plots" / "study_depth.png").stat().st_size > 10_000


def test_the_tree_preset_searches_sglangs_tree_and_a_chain_engines_depth(specexp) -> None:
    """tune_tree, dry runs: on SGLang depth, top-k and width; on the reference engine (a chain) the
    depth alone, said once."""
    tree = specexp(
        "engine=sglang", "model=kimi_k25", "drafter=ttt5", "+sweep=tune_tree", "batch=4", "dry_run=true", "-m"
    )
    assert tree.proc.returncode == 0, tree.proc.stderr[-3000:]
    (space,) = [x for x in tree.proc.stderr.splitlines() if x.startswith("search space:")]
    assert all(k in space for k in ("drafter.num_steps", "drafter.topk", "drafter.num_draft_tokens")), space
    assert "accepts no value" not in tree.proc.stderr
    chain = specexp("drafter=tiny", "+sweep=tune_tree", "batch=4", "dry_run=true", "-m")
    assert chain.proc.returncode == 0, chain.proc.stderr[-3000:]
    err = " ".join(chain.proc.stderr.split())
    assert "accepts no value of drafter.topk, drafter.num_draft_tokens" in err and "searching drafter.num_steps" in err


def test_a_study_over_listed_batches_tunes_the_depth_at_each(specexp) -> None:
    """``batch=1,2`` with a study: the depth at each batch (one launch per trial, one objective per
    batch), a drafter=none baseline at each so every point has a speedup, never batch as a setting."""
    run = specexp("drafter=tiny", "+sweep=tune_depth", "batch=1,2", "hydra.sweeper.n_trials=2", "-m", timeout=900)
    err = run.proc.stderr
    assert run.proc.returncode == 0, err[-3000:]
    children = [r for r in run.runs() if r.data.tags.get("specexp.role") == "point"]
    baselines = sorted(c.data.params["batch"] for c in children if c.data.params["drafter.name"] == "none")
    assert baselines == ["1", "2"]
    trials = [c for c in children if c.data.params["drafter.name"] == "tiny"]
    assert sorted(c.data.params["batch"] for c in trials) == ["1", "1", "2", "2"]  # each trial at both batches
    assert all("speedup" in c.data.metrics for c in trials)
    assert all(c.info.run_name.count("batch=") == 1 for c in trials), [c.info.run_name for c in trials]
    rows = list(csv.DictReader((run.workdir / "multirun" / "best.csv").open()))
    assert [r["objective"] for r in rows] == ["output_throughput@b1", "output_throughput@b2"]
    assert "batch" not in rows[0]  # the load, not a tuned setting
    (parent,) = [r for r in run.runs() if r.data.tags.get("specexp.role") == "parent"]
    assert parent.data.tags["specexp.kind"] == "study" and parent.info.run_name.endswith("at batch 1,2")
    assert "tune_depth-torch-tiny-tiny-b1_2" in err  # the study named by its batches
    assert (run.workdir / "multirun" / "plots" / "study_depth.png").stat().st_size > 10_000
