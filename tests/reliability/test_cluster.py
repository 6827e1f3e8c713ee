"""Issue 37 item 8 on a real single-node SLURM (tests.reliability.slurm, started once for the
module): a job sbatch refuses fails its group's points with sbatch's words, is not submitted again,
and is never recorded as interrupted (a resume could not help); the launcher's gres is asked as
given, with no second GPU request; a study whose jobs are refused ends after its first trial, exit 2;
two GPU types are two jobs, each asking its own; a job sbatch takes runs its group there, named for
its sweep; a job scancel stops (seen through sacct) leaves its points interrupted, saying its state.

Outside CI (its time budget), where Debian's SLURM, its accounting and MariaDB are installed; 2 minutes:

    apt-get install -y --no-install-recommends slurm-wlm slurmdbd munge mariadb-server
    SPECEXP_TEST_OUTPUTS=/path/to/test_outputs python -m pytest tests/reliability/test_cluster.py -v --durations=0

A job's time-out and requeue takes minutes more: scripts/slurm_requeue.py.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.reliability import slurm

pytestmark = [
    pytest.mark.scale,
    # Where SLURM is installed (the development machine): CI leaves it out, for its time budget.
    pytest.mark.skipif(
        not slurm.installed(), reason="no SLURM: apt-get install slurm-wlm slurmdbd munge mariadb-server"
    ),
]

REFUSED = "sbatch: error: Invalid generic resource (gres) specification"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with slurm.single_node(tmp_path_factory.mktemp("slurm")) as env:
        yield env


def on_slurm(*overrides: str) -> list[str]:
    return ["hydra/launcher=submitit_slurm", "hydra.launcher.timeout_min=5", "tracking.enabled=false", *overrides]


def test_a_job_sbatch_refuses_fails_its_points_with_sbatchs_words(ws, cluster: dict[str, str]) -> None:
    sweep = ws.root / "sweep"
    gres = "hydra.launcher.gres=gpu:h100:1"  # this cluster has no GPU: sbatch refuses the request
    run = ws.run(
        *on_slurm(gres, "engine.gpus=1", "drafter=none", "batch=1,2", f"hydra.sweep.dir={sweep}", "-m"), **cluster
    )
    assert run.returncode == 2, run.stdout[-3000:]  # nothing ran: the request is wrong, as bad input is
    said = f"server group 0: the scheduler refused its job: {REFUSED}; its points failed"
    assert said in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    assert "interrupted" not in run.stdout + run.stderr
    points = list(csv.DictReader((sweep / "summary.csv").open()))
    assert [p["status"] for p in points] == ["failed", "failed"]
    assert {p["error"] for p in points} == {f"the scheduler refused server group 0's job: {REFUSED}"}
    (script,) = (sweep / ".submitit").glob(".submission_file_*.sh")  # submitted once: not retried
    asked = [line for line in script.read_text().splitlines() if "gpu" in line]
    assert asked == ["#SBATCH --gres=gpu:h100:1"]  # the launcher's gres as given, no --gpus-per-node beside it


def test_a_job_sbatch_takes_runs_its_group_on_the_node(ws, cluster: dict[str, str]) -> None:
    sweep = ws.root / "sweep"
    run = ws.run(*on_slurm("drafter=none", "dry_run=true", f"hydra.sweep.dir={sweep}", "-m"), **cluster)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (script,) = (sweep / ".submitit").glob("*/*_submission.sh")
    asked = [line for line in script.read_text().splitlines() if line.startswith("#SBATCH")]
    assert not [line for line in asked if "gpus" in line or "gres" in line], asked  # a CPU server asks no GPU
    (attempts,) = (sweep / "groups" / "0" / "attempts.jsonl").read_text().splitlines()[:1]
    job = json.loads(attempts)["slurm_job_id"]
    shown = subprocess.run(
        ["scontrol", "show", "job", job], env={**os.environ, **cluster}, capture_output=True, text=True
    )
    assert "JobState=COMPLETED" in shown.stdout, shown.stdout + shown.stderr
    sweep_id = json.loads((sweep / "groups" / "0" / "group.json").read_text())["sweep_id"]
    assert f"JobName=specexp-{sweep_id}" in shown.stdout  # scancel --name stops this sweep's jobs only


def test_a_study_whose_jobs_sbatch_refuses_ends_after_one_trial(ws, cluster: dict[str, str]) -> None:
    sweep, journal = ws.root / "sweep", ws.root / "study.log"
    study = ["hydra.sweeper.mode=optuna", "drafter=tiny", "drafter.num_steps=range(1,5)"]
    storage = f"hydra.sweeper.storage=journal://{journal}"
    gres = ["hydra.launcher.gres=gpu:h100:1", "engine.gpus=1"]  # this cluster has no GPU
    run = ws.run(*on_slurm(*gres, *study, storage, f"hydra.sweep.dir={sweep}", "-m"), **cluster)
    assert run.returncode == 2, run.stdout[-3000:] + run.stderr[-3000:]
    (said,) = [line for line in run.stderr.splitlines() if re.match(r"trial \d+ ", line)]  # the console's
    assert f"{REFUSED}); the study stops: nothing ran" in said, said
    assert len(list((sweep / ".submitit").glob(".submission_file_*.sh"))) == 2  # the trial and its baseline


def test_two_gpu_types_are_two_jobs_each_asking_its_own(ws, cluster: dict[str, str]) -> None:
    sweep = ws.root / "sweep"
    types = ["engine.gpus=1", "engine.gpu_type=a100,h100", "batch=1,2", "drafter=none"]
    run = ws.run(*on_slurm(*types, f"hydra.sweep.dir={sweep}", "-m"), **cluster)
    assert run.returncode == 2, run.stdout[-3000:]  # this cluster has neither type: both refused
    scripts = (sweep / ".submitit").glob(".submission_file_*.sh")
    asked = sorted(line for s in scripts for line in s.read_text().splitlines() if "--gres" in line)
    assert asked == ["#SBATCH --gres=gpu:a100:1", "#SBATCH --gres=gpu:h100:1"]  # each type its own job
    points = list(csv.DictReader((sweep / "summary.csv").open()))
    assert [p["status"] for p in points] == ["failed"] * 4, points[0].keys()


def test_a_job_scancel_stops_leaves_its_points_interrupted(ws, cluster: dict[str, str]) -> None:
    sweep = ws.root / "sweep"
    long = ["drafter=none", "batch=1,2", "workload.num_prompts=100000", f"hydra.sweep.dir={sweep}", "-m"]
    with ws.started(*on_slurm(*long), **cluster) as proc:
        attempts = sweep / "groups" / "0" / "attempts.jsonl"
        end = time.monotonic() + 120
        # The job's first point measures: its server is up (a job cancelled while it still starts
        # leaves no point of its own to record the signal, and both read "ended before this point did").
        while not (sweep / "0" / "server.json").exists():
            assert proc.poll() is None and time.monotonic() < end, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.5)
        sweep_id = json.loads((sweep / "groups" / "0" / "group.json").read_text())["sweep_id"]
        env = {**os.environ, **cluster}
        subprocess.run(["scancel", f"--name=specexp-{sweep_id}"], env=env, check=True, capture_output=True)
        out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 1, out[-3000:]
    points = list(csv.DictReader((sweep / "summary.csv").open()))
    assert [p["status"] for p in points] == ["interrupted", "interrupted"], out[-3000:]
    errors = [p["error"] for p in points]  # the point scancel's SIGTERM cut, and the one never begun
    assert errors[0] == "interrupted (exit 143)", errors
    assert "ended before this point did" in errors[1] and "(state: CANCELLED by " in errors[1], errors
    assert [json.loads(line)["event"] for line in attempts.read_text().splitlines()] == ["start", "end"]
