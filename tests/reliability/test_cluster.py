"""Issue 37 item 8 on a real single-node SLURM (tests.reliability.slurm, started once for the
module): a job sbatch refuses fails its group's points with sbatch's words, is not submitted again,
and is never recorded as interrupted (a resume could not help); the launcher's gres is asked as
given, with no second GPU request; a job sbatch takes runs its group there, named for its sweep."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.reliability import slurm

pytestmark = [
    pytest.mark.scale,
    # Where SLURM is installed (the development machine): CI leaves it out, for its time budget.
    pytest.mark.skipif(not slurm.installed(), reason="no SLURM: apt-get install slurm-wlm munge"),
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
