"""What specexp's sweepers share: composing every job up front, ordering jobs by server, and
reading the jobs' results back.

Hydra varies the last override fastest, so ``batch=1,4 drafter=none,tiny`` alternates drafters and
would relaunch the server for every job. Every job's config is composed and validated first (so
bad input fails before any server starts), grouped by its server key in order of first appearance,
and told the largest batch of its group (``max_batch``) so that one server admits them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from specexp.config import Config
from specexp.configstore import load
from specexp.point import describe, preflight


class LaunchingSweeper(Sweeper):
    """Hydra's context, the config and the launcher, as every specexp sweeper needs them.

    Not a BasicSweeper subclass: Hydra's plugin scan re-executes that module, which breaks its
    ``super()`` calls in subclasses.
    """

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )


@dataclass
class Job:
    overrides: list[str]
    cfg: Config
    group: str


def group_key(cfg: Config, global_max: int) -> str:
    """The server key with the capacity fixed, so jobs differing only in batch group together."""
    return describe(replace(cfg, max_batch=max(global_max, cfg.batch)))[2]


def compose(sweeper: LaunchingSweeper, overrides: Sequence[str]) -> tuple[Config, DictConfig]:
    raw = sweeper.hydra_context.config_loader.load_sweep_config(sweeper.config, list(overrides))
    return load(raw), raw


def plan(sweeper: LaunchingSweeper, jobs: list[list[str]], sweep_id: str) -> list[list[str]]:
    """Jobs ordered by server, each with ``sweep_id`` and its server's ``max_batch`` appended."""
    composed = [compose(sweeper, o)[0] for o in jobs]
    global_max = max(c.batch for c in composed)
    planned = [Job(o, c, group_key(c, global_max)) for o, c in zip(jobs, composed, strict=True)]
    order = {g: i for i, g in reversed(list(enumerate(j.group for j in planned)))}
    planned.sort(key=lambda j: order[j.group])  # stable: the command line's order within a server
    group_max: dict[str, int] = {}
    for j in planned:
        group_max[j.group] = max(group_max.get(j.group, 0), j.cfg.batch)
    if not planned[0].cfg.dry_run:  # the engines' own parsers, once per server, before any starts
        for group, first in {j.group: j for j in reversed(planned)}.items():
            preflight(replace(first.cfg, max_batch=group_max[group]))
    return [[*j.overrides, f"sweep_id={sweep_id}", f"max_batch={group_max[j.group]}"] for j in planned]


def job_rows(returns: Sequence[JobReturn]) -> list[dict[str, Any]]:
    """Each job's result dict; a job that raised becomes a failed row carrying the exception."""
    rows = []
    for r in returns:
        if r.status == JobStatus.COMPLETED and isinstance(r.return_value, dict):
            rows.append(r.return_value)
        else:
            rows.append({"status": "failed", "params": {}, "metrics": {}, "error": str(r._return_value)})
    return rows
