"""The Optuna sweeper on the live reference engine: one study (the depth preset at two listed
batches, resumed by a second process on its journal), run once for the module and read by several
tests; each trial measured in turns with a baseline of its own; infeasible trials never launched, a
failed trial recorded, the presets' spaces. The search rules themselves (the grid's best depth found
by TPE, deterministic repeats, pruning, resuming, a small space covered before anything repeats,
pairing under a drifting load) are tried on synthetic objectives in tests/unit/test_tune_search.py
and tests/unit/test_tune_pairing.py."""

import csv
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from specexp.report.__main__ import main as report_main
from tests import conftest

STUDY = "tune_depth-torch-tiny-tiny-b1_2"  # the preset's name, ending with the listed batches


@dataclass
class Study:
    first: conftest.Run  # n_trials=1
    again: conftest.Run  # the same command with n_trials=2: the study resumed from its journal
    journal: Path

    @property
    def folder(self) -> Path:
        return self.again.workdir / "multirun"

    def children(self) -> list:
        return [r for r in self.again.runs() if r.data.tags.get("specexp.role") == "point"]

    def parent(self):
        """The parent run of the resumed (second) invocation."""
        parents = [r for r in self.again.runs() if r.data.tags.get("specexp.role") == "parent"]
        return max(parents, key=lambda p: p.info.start_time)


@pytest.fixture(scope="module")
def study(tmp_path_factory, shared_outputs, mlflow_template) -> Study:
    """``+sweep=tune_depth batch=1,2`` in two invocations on one journal: a trial, then a second.
    The tests' own ``specexp`` runner (tests/conftest.py), in a folder that lives for the module."""
    folder = tmp_path_factory.mktemp("study")
    specexp = conftest.specexp_runner(folder, shared_outputs, mlflow_template)
    journal = folder / "study.log"
    common = ["drafter=tiny", "+sweep=tune_depth", "batch=1,2", f"hydra.sweeper.storage=journal://{journal}"]
    first = specexp(*common, "hydra.sweeper.n_trials=1", "-m", timeout=900)
    assert first.proc.returncode == 0, first.proc.stderr[-3000:]
    again = specexp(*common, "hydra.sweeper.n_trials=2", "-m", timeout=900)
    assert again.proc.returncode == 0, again.proc.stderr[-3000:]
    return Study(first, again, journal)


def live_study(test):
    """A test reading the live study: outside the quick tier (which picks tests by the fixtures they
    ask for, and does not know this module's), and given the time of both invocations, which run in
    the setup of whichever of these tests comes first (over 600 s on two loaded cores)."""
    return pytest.mark.slow(pytest.mark.timeout(1800)(test))


@live_study
def test_the_study_resumes_and_another_process_loads_it(study: Study) -> None:
    code = (
        "import optuna; from optuna.storages import JournalStorage; "
        "from optuna.storages.journal import JournalFileBackend; "
        f"backend = JournalFileBackend({str(study.journal)!r}); "
        f"s = optuna.load_study(study_name={STUDY!r}, storage=JournalStorage(backend)); "
        "print(sum(t.state.name in ('COMPLETE', 'FAIL') for t in s.trials))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == 2  # n_trials is the study's total: the rerun added one measured trial
    assert STUDY in study.first.proc.stderr and STUDY in study.again.proc.stderr  # named by its batches
    # one MLflow run per measured trial and batch over both invocations (the store is shared), and
    # beside each a drafter=none baseline at both batches, measured in turns with that trial only
    children = study.children()
    trials = [c for c in children if "optuna.trial" in c.data.tags]
    assert sorted(c.data.params["batch"] for c in trials) == ["1", "1", "2", "2"]  # each trial at both
    baselines = [c for c in children if c.data.params["drafter.name"] == "none"]
    paired = sorted((b.data.tags["optuna.baseline_of"], b.data.params["batch"]) for b in baselines)
    assert paired == [(t, b) for t in ("0", "1") for b in ("1", "2")]
    # one launch per trial, measuring every batch on it (its baseline's server up beside it)
    assert sum(c.data.tags["specexp.server_reused"] == "false" for c in trials) == 2
    assert sum(c.data.tags["specexp.server_reused"] == "false" for c in baselines) == 2
    # each trial's windows took turns with its baseline's: the study was told paired speedups
    rows = list(csv.DictReader((study.folder / "trials.csv").open()))
    for r in rows:
        assert float(r["speedup@b1_lo"]) <= float(r["speedup@b1"]) <= float(r["speedup@b1_hi"])
    for err in (study.first.proc.stderr, study.again.proc.stderr):
        assert "no-name" not in err  # Optuna's line for each study it creates: quiet unless asked
    parents = [r for r in study.again.runs() if r.data.tags.get("specexp.role") == "parent"]
    assert all("Optuna over drafter.num_steps" in p.info.run_name for p in parents)


@live_study
def test_the_depth_preset_on_a_chain_engine_searches_the_depth_alone(study: Study) -> None:
    """tune_depth on the reference engine: depth only (no trial pruned for a top-k the engine
    refuses), a drafter=none baseline so every trial has a speedup, one objective per batch."""
    err = study.first.proc.stderr
    assert "searching drafter.num_steps" in err and "infeasible" not in err + study.again.proc.stderr
    rows = list(csv.DictReader((study.folder / "trials.csv").open()))
    assert [r["state"] for r in rows] == ["COMPLETE"] * 2 and "drafter.topk" not in rows[0]
    trials = [c for c in study.children() if c.data.params["drafter.name"] == "tiny"]
    assert len(trials) == 4 and all("speedup" in c.data.metrics for c in trials)
    assert all(c.info.run_name.count("batch=") == 1 for c in trials), [c.info.run_name for c in trials]
    best = list(csv.DictReader((study.folder / "best.csv").open()))
    assert [r["objective"] for r in best] == ["speedup@b1", "speedup@b2"]  # against each trial's baseline
    assert all(r["method"].startswith(("paired t over", "t over the 2 trials")) for r in best), best
    assert float(best[0]["lo"]) <= float(best[0]["value"]) <= float(best[0]["hi"])
    assert "batch" not in best[0]  # the load, not a tuned setting
    parent = study.parent()
    assert parent.data.tags["specexp.kind"] == "study" and parent.info.run_name.endswith("at batch 1,2")


@live_study
def test_the_study_says_its_best_at_each_batch_as_the_verdict_does(study: Study) -> None:
    """The best stated with the configurations it cannot be told apart from, repeats pooled, in the
    console, verdict.txt and the parent's note alike; a plot by depth; no library notes."""
    err = study.again.proc.stderr
    assert re.search(r"best at batch 1: drafter\.num_steps=\d", err), err[-3000:]
    assert "ExperimentalWarning" not in err and "low `target` values" not in err
    assert "no speculative point has a baseline" not in err
    verdict = (study.folder / "verdict.txt").read_text()
    (line,) = [x for x in verdict.splitlines() if x.startswith("best at batch 2:")]
    assert line in err  # the console says what verdict.txt says
    best_row = next(r for r in csv.DictReader((study.folder / "best.csv").open()) if r["objective"].endswith("@b2"))
    repeated = len(best_row["trials"].split()) > 1
    best_clause = line.split(";")[0]  # the indistinguishable ones may be pooled too: look at the best's own
    assert ("pooled" in best_clause) == repeated
    assert ("no single best" in line) == bool(best_row["indistinguishable"])
    assert line in study.parent().data.tags["mlflow.note.content"]
    # and a report on the study says it too, from every trial in the storage its points name
    assert report_main([str(study.folder), "--out", str(study.folder / "report"), "--no-plots"]) == 0
    assert f"- {line}" in (study.folder / "report" / "report.md").read_text()
    assert (study.folder / "plots" / "study_depth.png").stat().st_size > 10_000


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
    """A trial whose server fails is told FAIL and the study goes on; the good trial's objective
    (acceptance under greedy decoding of the same prompts every window) is exact: its 95% half-width
    is 0, which makes it deterministic, so the tuner never measures it twice (tests/unit/test_tune_search.py)."""
    good = shared_outputs / "models" / "tiny" / "target"
    run = specexp(
        "drafter=tiny",
        "baseline=off",
        "workload.unique=false",
        "workload.output_len=24",
        "hydra.sweeper.mode=optuna",
        "hydra.sweeper.objective=accept_length",
        f"model.path=choice({good},{broken_model})",
        "hydra.sweeper.sampler=grid",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.study_name=fails",
        "engine.startup_timeout_s=60",
        "-m",
    )
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    rows = list(csv.DictReader((run.workdir / "multirun" / "trials.csv").open()))
    assert sorted(r["state"] for r in rows) == ["COMPLETE", "FAIL"]
    (complete,) = [r for r in rows if r["state"] == "COMPLETE"]
    assert float(complete["accept_length_ci95"]) == 0.0 and float(complete["accept_length"]) > 1.0
    children = [r for r in run.runs() if r.data.tags.get("specexp.role") != "parent"]
    assert {c.data.tags["optuna.trial"] for c in children} == {"0", "1"}
    (parent,) = [r for r in run.runs() if r.data.tags.get("specexp.role") == "parent"]
    assert parent.data.metrics["trials_complete"] == 1 and "best.accept_length" in parent.data.metrics


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
