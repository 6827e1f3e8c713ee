"""A real single-node SLURM for the cluster tests (Debian's slurm-wlm and munge): munged, MariaDB,
slurmdbd, slurmctld and slurmd started as this user with every file (key, sockets, database, state,
logs, spool) under one folder and ports of their own, so nothing of the machine's own setup is used
or changed. About 10 s to come up. Jobs see the submitter's environment (sbatch exports it), so they
run this checkout's specexp.

Accounting (slurmdbd on MariaDB) is what a cluster has and what submitit reads a job's state from
(``sacct``): without it a job that ends without its result (scancel, a node lost) is never seen to
end, and the sweep waits for it forever.

    apt-get install -y --no-install-recommends slurm-wlm slurmdbd munge mariadb-server
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")


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


def config(root: Path, ctld_port: int, d_port: int, dbd_port: int) -> str:
    """slurm.conf for one node, this host, its CPUs and no GPU (a gres request is refused, as a
    cluster without that resource refuses it); accounting in slurmdbd, no cgroups (a container has
    none to give)."""
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
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={dbd_port}
AccountingStoragePass={root / "munge.sock"}
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=30
NodeName={host} CPUs={os.cpu_count() or 1} RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def dbd_config(root: Path, dbd_port: int, db_port: int) -> str:
    """slurmdbd.conf: its records in the MariaDB started under ``root`` (root, no password, TCP)."""
    return f"""AuthType=auth/munge
AuthInfo=socket={root / "munge.sock"}
DbdHost=localhost
DbdPort={dbd_port}
SlurmUser={os.environ.get("USER") or "root"}
PidFile={root / "slurmdbd.pid"}
LogFile={root / "slurmdbd.log"}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db_port}
StorageUser=root
StorageLoc=slurm_acct_db
"""


def _database(root: Path, port: int, env: dict[str, str]) -> subprocess.Popen:
    """MariaDB under ``root``, on 127.0.0.1:``port``, in the background (it does not fork itself:
    its process is this one's child, to be waited for)."""
    data = root / "db"
    install = ["mariadb-install-db", f"--datadir={data}", "--user=root", "--auth-root-authentication-method=normal"]
    subprocess.run([*install, "--skip-test-db"], check=True, env=env, capture_output=True)
    server = [
        _binary("mariadbd"),
        "--no-defaults",
        f"--datadir={data}",
        "--user=root",
        f"--port={port}",
        "--bind-address=127.0.0.1",
        f"--socket={root / 'mariadb.sock'}",
        f"--pid-file={root / 'mariadb.pid'}",
        f"--log-error={root / 'mariadb.log'}",
        "--innodb-buffer-pool-size=32M",
    ]
    return subprocess.Popen(
        server, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def _wait(what: str, ready: Callable[[], bool], end: float, root: Path) -> None:
    while not ready():
        if time.monotonic() > end:
            raise RuntimeError(f"{what} did not come up in time; see {root}/*.log")
        time.sleep(0.3)


def _answers(argv: list[str], env: dict[str, str], wanted: str = "") -> bool:
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    return done.returncode == 0 and wanted in done.stdout


@contextlib.contextmanager
def single_node(root: Path, ready_s: float = 30.0) -> Iterator[dict[str, str]]:
    """The cluster up for the block's length; the environment its clients need (SLURM_CONF). Every
    job is cancelled and every daemon this started is stopped on the way out."""
    for sub in ("ctld", "spool"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    ctld_port, d_port, dbd_port, db_port = _free_ports(4)
    conf = root / "slurm.conf"
    conf.write_text(config(root, ctld_port, d_port, dbd_port))
    dbd_conf = root / "slurmdbd.conf"
    dbd_conf.write_text(dbd_config(root, dbd_port, db_port))
    dbd_conf.chmod(0o600)  # slurmdbd refuses a config others can read
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
    database: subprocess.Popen | None = None
    try:
        end = time.monotonic() + ready_s
        subprocess.run(munged, check=True, env=env, capture_output=True)
        database = _database(root, db_port, env)
        client = ["mariadb", "--no-defaults", "-h", "127.0.0.1", f"-P{db_port}", "-uroot", "-e", "select 1"]
        _wait("MariaDB", lambda: _answers(client, env), end, root)
        subprocess.run([_binary("slurmdbd")], check=True, env=env, capture_output=True)
        _wait("slurmdbd", lambda: _answers(["sacctmgr", "-n", "show", "cluster"], env), end, root)
        subprocess.run(["sacctmgr", "-i", "add", "cluster", "specexp-test"], env=env, capture_output=True)
        subprocess.run([_binary("slurmctld"), "-i"], check=True, env=env, capture_output=True)
        subprocess.run([_binary("slurmd")], check=True, env=env, capture_output=True)
        _wait("SLURM", lambda: _answers(["sinfo", "-h", "-o", "%T"], env, "idle"), end, root)
        yield {"SLURM_CONF": str(conf)}
    finally:
        with contextlib.suppress(OSError, subprocess.SubprocessError):  # also a cluster that never came up
            subprocess.run(["scancel", "--full", f"--user={os.getuid()}"], env=env, capture_output=True, timeout=10)
        for name in ("slurmd", "slurmctld", "slurmdbd"):
            _stop(root / f"{name}.pid")
        if database is not None:
            database.terminate()
            try:
                database.wait(timeout=30)
            except subprocess.TimeoutExpired:
                database.kill()
                database.wait()
        _stop(root / "munged.pid")


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
