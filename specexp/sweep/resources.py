"""What server groups running side by side need from a node: GPUs that do not overlap, ports that do
not collide.

A group takes ``Config.gpus`` GPUs (engine.gpus, else model.tp x the engine's data-parallel replicas;
0 on CPU). On SLURM the scheduler allocates them: each group's job asks for its own count
(``gpus_per_node``), so small groups share a node with disjoint CUDA_VISIBLE_DEVICES and a tp=8 group
takes an 8-GPU node whole. Where groups run side by side on this node (submitit_local, joblib),
specexp deals the node's GPUs out itself; with the basic launcher groups run one at a time and each
has the whole node. Ports: every server gets a free port unless engine.port fixes one, which groups
in parallel cannot share.
"""

from __future__ import annotations

import logging
import math
import os
import subprocess
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from omegaconf import DictConfig

from specexp.config import ConfigError, TrackingConfig
from specexp.sweep.groups import Group
from specexp.sweep.job_plan import Job

log = logging.getLogger("specexp")

# Launchers whose jobs run as processes on this node, side by side: specexp deals the GPUs out.
SAME_NODE = ("submitit_launcher.LocalLauncher", "joblib_launcher.JoblibLauncher")


def same_node(launcher: DictConfig) -> bool:
    return str(launcher.get("_target_", "")).endswith(SAME_NODE)


def schedules_gpus(launcher: DictConfig) -> bool:
    """A cluster launcher with a per-job GPU request (submitit_slurm's gpus_per_node)."""
    return not same_node(launcher) and "gpus_per_node" in launcher


def gpu_request(launcher: DictConfig, gpus: int) -> int | None:
    """The gpus_per_node a group's job asks a scheduler for: the group's GPUs, at least what
    hydra.launcher.gpus_per_node asks (whole nodes); None when the launcher's own request stands,
    hydra.launcher.gres's among them (a second GPU request beside it would contradict it)."""
    if not schedules_gpus(launcher) or launcher.get("gres"):
        return None
    wanted = max(gpus, launcher.get("gpus_per_node") or 0) or None
    return None if wanted == launcher.get("gpus_per_node") else wanted


SCALED = ("cpus_per_task", "mem_gb")  # a one-GPU server's share (or the configured GPUs'), as configured


def job_name(sweep_id: str) -> str:
    """A group job's name on the scheduler: its sweep's, so ``scancel --name`` stops that sweep only."""
    return f"specexp-{sweep_id}"


def launcher_fields(launcher: DictConfig, group: Group) -> dict[str, Any]:
    """What a group's job sets in hydra.launcher on a scheduler ({} elsewhere): its name (the sweep
    id's), its GPUs (hydra.launcher.gres as it is when set; else gpu:<engine.gpu_type>:<count>, or
    gpus_per_node without a type), and CPUs and memory scaled from what the launcher's GPU count asks
    (one GPU when it asks none) to what the group asks: a tp=8 group asks eight times a tp=1 group."""
    if not schedules_gpus(launcher):
        return {}
    fields: dict[str, Any] = {"name": job_name(group.sweep_id)}
    if launcher.get("gres"):
        return fields
    base = launcher.get("gpus_per_node") or 1
    wanted = max(group.gpus, launcher.get("gpus_per_node") or 0)
    if wanted and group.gpu_type:
        fields |= {"gres": f"gpu:{group.gpu_type}:{wanted}", "gpus_per_node": None}
    elif wanted != (launcher.get("gpus_per_node") or 0):
        fields["gpus_per_node"] = wanted
    for key in SCALED:
        if launcher.get(key) and wanted > base:
            fields[key] = math.ceil(launcher[key] * wanted / base)
    return fields


def node_devices() -> list[str]:
    """This node's GPUs as CUDA_VISIBLE_DEVICES names them: that variable when set, else nvidia-smi's
    list, else none."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return out.stdout.split() if out.returncode == 0 else []


def check_parallel(groups: Sequence[Sequence[Job]], devices: list[str] | None) -> None:
    """Groups about to run side by side: no shared fixed port; on this node, each fits its GPUs
    (``devices``; None: a scheduler allocates). ConfigError before anything starts."""
    if len(groups) > 1:
        fixed = sorted({j.cfg.engine.port for g in groups for j in g if j.cfg.engine.port is not None})
        if fixed:
            raise ConfigError(
                "engine.port",
                f"port {fixed[0]} is fixed, and {len(groups)} server groups run in parallel",
                "leave engine.port null: every server then gets a free port",
            )
    if devices is None:
        warn_local_store(j.cfg.tracking for g in groups for j in g)
        return
    for g in groups:
        if max(j.cfg.gpus for j in g) > len(devices):
            raise ConfigError(
                "engine.gpus",
                f"a server of {g[0].cfg.engine.name} with model.tp={g[0].cfg.model.tp} takes {g[0].cfg.gpus} GPU(s); "
                f"this node has {len(devices)} ({','.join(devices) or 'none'})",
                "run it where the GPUs are (hydra/launcher=submitit_slurm), or set engine.gpus=0 for an engine on CPU",
            )


_warned: set[str] = set()


def warn_local_store(trackings: Iterable[TrackingConfig]) -> None:
    """A cluster's jobs run on other nodes and each writes its point's MLflow run: a SQLite file on a
    shared filesystem takes their writes badly (locks, lost updates). Said once per store."""
    for tracking in trackings:
        if tracking.enabled and tracking.uri.startswith("sqlite:") and tracking.uri not in _warned:
            _warned.add(tracking.uri)
            log.warning(
                "tracking.uri=%s is a SQLite file, which jobs on other nodes write at once over a shared "
                "filesystem: runs may be lost to its locks. Fix: an MLflow server's URI "
                "(tracking.uri=http://<host>:5000) or a database's (postgresql://...)",
                tracking.uri,
            )


class DevicePool:
    """The node's GPUs dealt out to groups running at once: disjoint slices; a group waits until as
    many are free as it takes."""

    def __init__(self, devices: list[str]) -> None:
        self.order = {d: i for i, d in enumerate(devices)}
        self.free = list(devices)
        self.changed = threading.Condition()

    def take(self, count: int) -> list[str]:
        with self.changed:
            self.changed.wait_for(lambda: len(self.free) >= count)
            taken, self.free = self.free[:count], self.free[count:]
            return taken

    def give(self, devices: list[str]) -> None:
        with self.changed:
            self.free = sorted(self.free + devices, key=self.order.__getitem__)
            self.changed.notify_all()
