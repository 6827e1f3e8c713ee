"""With ``hydra/launcher=submitit_slurm`` each server group's job asks SLURM for its server's GPUs
(the launcher's gpus_per_node, which submitit writes into the sbatch script), and a job sbatch
refuses fails its group's points with sbatch's words: no cluster needed to see either."""

from __future__ import annotations

import subprocess

from hydra import compose, initialize_config_dir
from hydra._internal.callbacks import Callbacks
from hydra.core.global_hydra import GlobalHydra
from hydra.core.utils import setup_globals
from hydra.types import HydraContext
from submitit.core.utils import FailedJobError, UncompletedJobError

from hydra_plugins.specexp_sweepers import SpecexpSweeper
from specexp.app import task
from specexp.configstore import CONF_DIR
from specexp.result import PointResult
from specexp.sweep.groups import Group, Point, collect, form_groups, refusal, refused_before_anything, restart


def test_each_groups_job_asks_slurm_for_its_servers_gpus(tmp_path) -> None:
    setup_globals()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        config = compose(
            "config",
            overrides=["hydra/launcher=submitit_slurm", "hydra.launcher.partition=gpu", f"hydra.sweep.dir={tmp_path}"],
            return_hydra_config=True,
        )
        sweeper = SpecexpSweeper()
        context = HydraContext(config_loader=GlobalHydra.instance().config_loader(), callbacks=Callbacks())
        sweeper.setup(hydra_context=context, task_function=task, config=config)
        jobs = [
            ["dry_run=true", "engine=vllm", "drafter=none", "model.tp=4"],
            ["dry_run=true", "engine=sglang", "drafter=none", "model.tp=2", "engine.dp_size=4"],
            ["dry_run=true", "engine=torch", "drafter=none"],
        ]
        jobs.append(["dry_run=true", "engine=vllm", "drafter=none", "engine.gpu_type=h100"])
        groups = form_groups(sweeper.plan(jobs, "s"), 0, 0)
        asked = [sweeper.launcher_for(g).params for g in groups]
    assert [p.get("gpus_per_node") for p in asked] == [4, 8, None, None]  # a CPU server asks for no GPU
    assert [p.get("gres") for p in asked] == [None, None, None, "gpu:h100:1"]  # a type: in gres, not beside it
    assert {p["name"] for p in asked} == {"specexp-s"}  # the sweep's id: scancel --name stops this sweep only
    assert {p["partition"] for p in asked} == {"gpu"}  # everything else as configured


def submission_refused(stderr: str, command: str = "sbatch") -> FailedJobError:
    """What submitit raises when its submission command fails (submitit.core.utils.CommandFunction):
    the command's stderr, caused by its CalledProcessError."""
    try:
        try:
            raise subprocess.CalledProcessError(1, [command, "/sweep/.submitit/x.sh"], stderr=stderr)
        except subprocess.CalledProcessError as exc:
            raise FailedJobError(stderr) from exc
    except FailedJobError as refused:
        return refused


def test_a_scheduler_refusal_fails_the_groups_points_with_its_words_never_retried(tmp_path) -> None:
    said = "sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification"
    refused = submission_refused(f"sbatch: warning: something first\n{said}\n")
    assert refusal(refused) == said
    assert refusal(submission_refused("boom", command="srun")) is None  # not a submission
    assert refusal(FailedJobError("Job (task=0) failed during processing")) is None  # it ran, and failed
    assert not restart(tmp_path, 0, refused, 0)  # the same request would be refused again
    assert restart(tmp_path, 0, RuntimeError("no log file"), 0)  # a job that failed to start is retried
    group = Group(0, "key", 1, [Point(0, ["batch=1"]), Point(1, ["batch=4"])])
    results = collect(group, tmp_path, refused, lambda o: {"batch": o[0].split("=")[1]})
    assert [(r.status, r.params["batch"]) for r in results] == [("failed", "1"), ("failed", "4")]  # not interrupted
    assert results[0].error == f"the scheduler refused server group 0's job: {said}"
    assert refused_before_anything(results)  # the sweep exits 2: its request is wrong, nothing ran
    ok = PointResult.from_params("ok", {"batch": "8"})
    assert not refused_before_anything([ok, *results]) and not refused_before_anything([])


def test_a_job_the_scheduler_ended_says_its_state_in_its_points_error(tmp_path) -> None:
    said = f"Job 7 (task: 0) with path {tmp_path}/7_0_result.pkl\nhas not produced any output (state: CANCELLED by 0)"
    group = Group(0, "key", 0, [Point(0, ["batch=1"])])
    (point,) = collect(group, tmp_path, UncompletedJobError(said), lambda o: {"batch": "1"})
    assert point.status == "interrupted"  # a resume measures it
    assert point.error.endswith("/7_0_result.pkl (state: CANCELLED by 0))"), point.error  # scancel, in one line
