"""A real single-node SLURM for the cluster tests (Debian's slurm-wlm and munge): munged, slurmctld
and slurmd started as this user with every file (key, socket, state, logs, spool) under one folder
and ports of their own, so nothing of the machine's own setup is used or changed. About 3 s to come
up. Jobs see the submitter's environment (sbatch exports it), so they run this checkout's specexp.

    apt-get install -y --no-install-recommends slurm-wlm munge
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")


def installed() -> bool:
    return all(shutil.which(d) or Path(f"/usr/sbin/{d}").exists() for d in DAEMONS)


def _binary(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def config(root: Path, ctld_port: int, d_port: int) -> str:
    """slurm.conf for one node, this host, 2 CPUs and no GPU (a gres request is refused, as a cluster
    without that resource refuses it); no accounting, no cgroups (a container has none to give)."""
    host, user = socket.gethostname(), os.environ.get("USER") or "root"
    return f"""ClusterName=specexp-test
SlurmctldHost={host}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
AuthInfo=socket={root / "munge.sock"}
CredType=cred/munge
StateSaveLocation={root / "ctld"}
SlurmdSpoolDir={root / "spool"}
SlurmctldPidFile={root / "slurmctld.pid"}
SlurmdPidFile={root / "slurmd.pid"}
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmctldLogFile={root / "slurmctld.log"}
SlurmdLogFile={root / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=30
NodeName={host} CPUs={os.cpu_count() or 1} RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@contextlib.contextmanager
def single_node(root: Path, ready_s: float = 30.0) -> Iterator[dict[str, str]]:
    """The cluster up for the block's length; the environment its clients need (SLURM_CONF). Every
    job is cancelled and every daemon this started is stopped on the way out."""
    for sub in ("ctld", "spool"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    conf = root / "slurm.conf"
    conf.write_text(config(root, *_free_ports(2)))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    munged = [
        _binary("munged"),
        "--force",  # as root, and with a key outside /etc/munge
        f"--socket={root / 'munge.sock'}",
        f"--key-file={key}",
        f"--pid-file={root / 'munged.pid'}",
        f"--log-file={root / 'munged.log'}",
        f"--seed-file={root / 'munged.seed'}",
    ]
    try:
        subprocess.run(munged, check=True, env=env, capture_output=True)
        subprocess.run([_binary("slurmctld"), "-i"], check=True, env=env, capture_output=True)
        subprocess.run([_binary("slurmd")], check=True, env=env, capture_output=True)
        end = time.monotonic() + ready_s
        while "idle" not in subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout:
            if time.monotonic() > end:
                raise RuntimeError(f"SLURM did not come up in {ready_s:g} s; see {root}/*.log")
            time.sleep(0.3)
        yield {"SLURM_CONF": str(conf)}
    finally:
        with contextlib.suppress(OSError):
            subprocess.run(["scancel", "--full", f"--user={os.getuid()}"], env=env, capture_output=True, timeout=10)
        for name in ("slurmd", "slurmctld", "munged"):
            _stop(root / f"{name}.pid")


def _stop(pid_file: Path, wait_s: float = 10.0) -> None:
    """The daemon whose pid the file holds, stopped (SIGTERM, then SIGKILL)."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
