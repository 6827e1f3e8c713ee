"""A SLURM job's last time-out: submitit's signal handler raises UncompletedJobError ("timed-out too many
times") wherever the job is, mid-point. The point is recorded interrupted, not failed: a resume
measures it (found on the cluster, where such points read "failed" and a resume skipped nothing)."""

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from submitit.core.utils import UncompletedJobError

from specexp.configstore import CONF_DIR, to_job
from specexp.point import job

LAST = "Job not requeued because: timed-out too many times."


def test_the_last_time_out_leaves_the_point_interrupted(tmp_path: Path, monkeypatch) -> None:
    overrides = ["engine=torch", "model=tiny", "drafter=tiny", "tracking.enabled=false", f"outputs={tmp_path}"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        raw = compose("config", overrides=overrides)
    cfg, run = to_job(raw)

    def timed_out(*args: object) -> None:  # the handler's raise, in the middle of the point
        raise UncompletedJobError(LAST)

    monkeypatch.setattr(job, "_measure", timed_out)
    with pytest.raises(UncompletedJobError):  # on up: the job ends, as submitit expects
        job.run(cfg, run, raw, tmp_path / "0", 0)
    saved = json.loads((tmp_path / "0" / "results.json").read_text())
    assert saved["status"] == "interrupted" and LAST in saved["error"]
    assert job.interruption(RuntimeError("a point's own failure")) is None
