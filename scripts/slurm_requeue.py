"""A server group's job timing out on a real single-node SLURM, requeued, and timing out again: what
specexp keeps and says. Minutes, so a script rather than a test (issue 37, item 8).

The sweep has two points on one server: a short one, then one far longer than the job's one-minute
limit (hydra.launcher.timeout_min=1, max_num_timeout=1). SLURM signals the job before its limit,
submitit requeues it once (its scontrol requeue stops the job with SIGTERM); the requeued job keeps
what finished ok, sets an unfinished point's folder aside (<num>.attempt1) and measures it again,
until the second time-out ends the job. It prints the exit code, the group's attempts (two, one per
SLURM start), each point's status and the point folders.

    apt-get install -y --no-install-recommends slurm-wlm slurmdbd munge mariadb-server
    PYTHONPATH=. .venv/bin/python scripts/slurm_requeue.py   # the tiny model from $SPECEXP_OUTPUTS/models
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specexp.models.tiny import ensure_tiny
from tests.reliability import slurm

POINTS = ["drafter=none", "batch=1", "workload.num_prompts=4,5000", "workload.output_len=16", "workload.input_len=16"]


def main() -> None:
    models = Path(os.environ.get("SPECEXP_OUTPUTS", "outputs")).resolve() / "models"
    ensure_tiny(models.parent)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="specexp-slurm-") as tmp, slurm.single_node(Path(tmp) / "slurm") as env:
        sweep, outputs = Path(tmp) / "sweep", Path(tmp) / "outputs"  # the server logs go there, not yours
        outputs.mkdir()
        (outputs / "models").symlink_to(models, target_is_directory=True)
        argv = [
            sys.executable,
            "-m",
            "specexp",
            *POINTS,
            "hydra/launcher=submitit_slurm",
            "hydra.launcher.timeout_min=1",
            "hydra.launcher.signal_delay_s=30",
            "hydra.launcher.max_num_timeout=1",
            "tracking.enabled=false",
            f"hydra.sweep.dir={sweep}",
            "-m",
        ]
        start = time.monotonic()
        run = subprocess.run(
            argv, env={**os.environ, **env, "SPECEXP_OUTPUTS": str(outputs)}, capture_output=True, text=True
        )
        print(f"exit {run.returncode} after {time.monotonic() - start:.0f} s; its last lines:")
        print("\n".join(f"  {line}" for line in (run.stdout + run.stderr).splitlines()[-8:]))
        print("attempts.jsonl of group 0:")
        for line in (sweep / "groups" / "0" / "attempts.jsonl").read_text().splitlines():
            event = json.loads(line)
            print(f"  {event['event']:5} job {event.get('slurm_job_id')} {event.get('status', '')[:120]}")
        print("points:")
        for row in csv.DictReader((sweep / "summary.csv").open()):
            print(f"  {row['status']:11} {row['error'][:150]}")
        print("point folders:", " ".join(sorted(p.name for p in sweep.iterdir() if p.name[0].isdigit())))


if __name__ == "__main__":
    main()
