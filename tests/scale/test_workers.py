"""Two specexp processes on one Optuna study in a journal file and one fresh MLflow store, started
together: the study ends with exactly n_trials measured between them, no configuration measured by
both at once, every measured trial's run in the store beside a baseline of its own, and one answer:
both workers' summaries hold every trial and name the same best, under one parent run."""

from __future__ import annotations

import csv
import subprocess
from datetime import datetime

import optuna
import pytest
from mlflow import MlflowClient
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from specexp.sweep import claims
from tests.scale.conftest import specexp_argv, specexp_env

pytestmark = pytest.mark.scale

N_TRIALS = 4


def test_two_workers_share_one_study(tmp_path, outputs) -> None:
    journal = tmp_path / "study.journal"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    study = [
        "drafter=tiny",
        "hydra.sweeper.mode=optuna",
        f"hydra.sweeper.storage=journal://{journal}",
        "hydra.sweeper.study_name=one_study",
        f"hydra.sweeper.n_trials={N_TRIALS}",
        # The same sampler and seed in both: they propose the same depths in the same order, so the
        # claims are what keeps them apart.
        "hydra.sweeper.sampler=random",
        "drafter.num_steps=range(1,7)",
        f"tracking.uri={uri}",
    ]
    workers = [
        subprocess.Popen(
            specexp_argv(*study, f"hydra.sweep.dir={tmp_path / f'worker{i}'}", "-m"),
            cwd=tmp_path,
            env=specexp_env(outputs),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outs = [w.communicate(timeout=900)[0] for w in workers]
    for w, out in zip(workers, outs, strict=True):
        assert w.returncode == 0, out[-3000:]

    trials = optuna.load_study(
        study_name="one_study", storage=JournalStorage(JournalFileBackend(str(journal)))
    ).get_trials()
    for t in trials:
        print(t.number, t.state.name, t.params, t.user_attrs.get(claims.WORKER), t.user_attrs.get("stood_back", ""))
    measured = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.FAIL)]
    assert len(measured) == N_TRIALS and all(t.state == TrialState.COMPLETE for t in measured)
    assert len({t.user_attrs[claims.WORKER] for t in measured}) == 2  # both measured
    for t in trials:
        assert t.state != TrialState.RUNNING
        if t.state == TrialState.PRUNED:
            assert "stood_back" in t.user_attrs or "infeasible" in t.user_attrs
    for a in measured:
        for b in measured:
            if a.number < b.number and a.params == b.params:
                a_start, b_start = (datetime.fromtimestamp(t.user_attrs[claims.CLAIMED_AT]) for t in (a, b))
                assert a.datetime_complete <= b_start or b.datetime_complete <= a_start, (a.number, b.number)

    mlflow = MlflowClient(tracking_uri=uri)
    runs = mlflow.search_runs([mlflow.get_experiment_by_name("specexp").experiment_id])
    children = [r for r in runs if r.data.tags.get("specexp.role") != "parent"]
    trials_run = [r for r in children if "optuna.trial" in r.data.tags]
    assert len(trials_run) == N_TRIALS and {r.data.tags["optuna.study"] for r in trials_run} == {"one_study"}
    # one baseline per trial, measured in turns with it by the worker that measured the trial
    baselines = [r for r in children if "optuna.trial" not in r.data.tags]
    assert all(r.data.tags["specexp.drafter"] == "none" for r in baselines)
    assert sorted(r.data.tags["optuna.baseline_of"] for r in baselines) == sorted(str(t.number) for t in measured)

    # one answer: each worker's summary reads every trial of the study, whoever measured it
    folders = [tmp_path / f"worker{i}" for i in range(2)]
    listed = [list(csv.DictReader((f / "trials.csv").open())) for f in folders]
    assert [sorted(r["trial"] for r in rows if r["state"] == "COMPLETE") for rows in listed] == [
        sorted(str(t.number) for t in measured)
    ] * 2
    best = [list(csv.DictReader((f / "best.csv").open())) for f in folders]
    assert best[0] == best[1] and best[0][0]["objective"] == "speedup"
    said = [[x for x in (f / "verdict.txt").read_text().splitlines() if x.startswith("best at batch")] for f in folders]
    assert said[0] == said[1] and len(said[0]) == 1
    # one parent run for the study: the first worker's; the other's is its child
    parents = [r for r in runs if r.data.tags.get("specexp.role") == "parent"]
    (top,) = [p for p in parents if "mlflow.parentRunId" not in p.data.tags]
    assert [p.data.tags["mlflow.parentRunId"] for p in parents if p is not top] == [top.info.run_id]
