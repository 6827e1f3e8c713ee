"""A job sbatch refuses, without a cluster: a fake ``sbatch`` first on PATH says what SLURM says of a
GPU type it lacks and exits 1, as submitit sees a refusal (tests/reliability/test_cluster.py has
the real SLURM). Nothing runs, so a grid and a study alike end exit 2, their points or trial failed
with sbatch's words, and the job is asked for once: a study does not go on submitting trials that
would each be refused."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import optuna
import pytest

REFUSED = "sbatch: error: Invalid generic resource (gres) specification"


@pytest.fixture
def refusing_sbatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake sbatch first on PATH, refusing every job; each call appends a line to the file returned."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "sbatch-calls"
    bin_dir.mkdir()
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(f'#!/bin/sh\necho "$@" >> {calls}\necho "{REFUSED}" >&2\nexit 1\n')
    sbatch.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


ON_SLURM = ["hydra/launcher=submitit_slurm", "hydra.launcher.timeout_min=5", "tracking.enabled=false"]


def test_a_grid_sbatch_refuses_exits_2_its_points_failed(idle_ws, refusing_sbatch: Path) -> None:
    sweep = idle_ws.root / "sweep"
    run = idle_ws.main(*ON_SLURM, "drafter=none", "batch=1,2", f"hydra.sweep.dir={sweep}", "-m")
    assert run.returncode == 2, run.lines[-20:]
    points = list(csv.DictReader((sweep / "summary.csv").open()))
    assert [p["status"] for p in points] == ["failed", "failed"]
    assert {p["error"] for p in points} == {f"the scheduler refused server group 0's job: {REFUSED}"}
    assert len(refusing_sbatch.read_text().splitlines()) == 1  # never retried


def test_a_study_sbatch_refuses_ends_exit_2_after_one_failed_trial(idle_ws, refusing_sbatch: Path) -> None:
    sweep, storage = idle_ws.root / "sweep", idle_ws.root / "study.log"
    run = idle_ws.main(
        *ON_SLURM,
        "drafter=tiny",
        "hydra.sweeper.mode=optuna",
        "drafter.num_steps=range(1,5)",
        f"hydra.sweeper.storage=journal://{storage}",
        "hydra.sweeper.study_name=refused",
        f"hydra.sweep.dir={sweep}",
        "-m",
    )
    assert run.returncode == 2, run.lines[-20:]  # nothing ran: the request is wrong, as for bad input
    (said,) = [line for line in run.lines if re.match(r"trial \d+ ", line)]  # one trial, in one line
    error = re.search(r"failed \((the scheduler refused server group \d+'s job: .*)\); the study stops", said)
    assert error and error[1].endswith(REFUSED), said
    assert len(refusing_sbatch.read_text().splitlines()) == 2  # trial 0 and its baseline, once each
    backend = optuna.storages.journal.JournalFileBackend(str(storage))
    (trial,) = optuna.load_study(study_name="refused", storage=optuna.storages.JournalStorage(backend)).trials
    assert trial.state == optuna.trial.TrialState.FAIL
    assert trial.user_attrs["error"] == error[1]  # the trial's record holds sbatch's words too
