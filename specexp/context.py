"""What the program decides for one job at run time, kept apart from the user's config.

The user's schema (specexp.config) holds only what a user sets. A sweep decides more for each job: the
sweep it belongs to, its MLflow run's name, which launch of a repeated point it is, and how many
requests its server must admit (the largest concurrency of the jobs sharing that server). A sweeper
hands these to each job as overrides of the ``run`` node (``++run.sweep_id=...``), outside the schema
(so --help and ``--cfg job`` never show them), and the job's entry point reads them once, with the
validated config, into a frozen RunContext that the point's steps take as an argument. No config is
rebuilt or changed for them; a single run has the defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from specexp.config import Config, ConfigError

RUN_NODE = "run"  # the composed config's node a sweeper's per-job decisions come in


@dataclass(frozen=True)
class RunContext:
    """One job's run-time facts: ``of`` builds and checks it against the job's config."""

    sweep_id: str | None = None  # shared by the jobs of one multirun; None: a single run
    run_name: str | None = None  # the point's MLflow run; sweepers name it by the axes that vary
    repeat: int = 0  # which launch of a point (of ``repeats``) this job is
    # The largest concurrency (batch, or load.max_concurrency) this job's server must take: the
    # sweeper's, over the jobs sharing that server. None: this job's own.
    max_batch: int | None = None
    # The tokenizer folder that counts a length bucket's tokens (workload.length_tokenizer, else the
    # served model's); None without a bucket.
    length_tokenizer: str | None = None

    @classmethod
    def parse(cls, decided: Mapping[str, Any] | None) -> RunContext:
        """What a sweeper ``decided`` for a job (the ``run`` node: sweep_id, run_name, repeat,
        max_batch), typed; a single run's defaults for None."""
        given = dict(decided or {})
        unknown = sorted(set(given) - set(SWEEP_DECIDES))
        if unknown:
            raise ConfigError(f"{RUN_NODE}.{unknown[0]}", "not a run-time setting", f"use one of {SWEEP_DECIDES}")
        return cls(
            sweep_id=None if given.get("sweep_id") is None else str(given["sweep_id"]),
            run_name=None if given.get("run_name") is None else str(given["run_name"]),
            repeat=int(given.get("repeat") or 0),
            max_batch=None if given.get("max_batch") is None else int(given["max_batch"]),
        )

    @classmethod
    def of(cls, cfg: Config, decided: Mapping[str, Any] | None = None) -> RunContext:
        """The context of a job of ``cfg`` with what its sweeper ``decided``, checked against ``cfg``
        (ConfigError for a value that does not fit it)."""
        w = cfg.workload
        tokenizer = (w.length_tokenizer or cfg.model.tokenizer or cfg.model.path) if w.length_bucket else None
        run = replace(cls.parse(decided), length_tokenizer=tokenizer)
        run.check(cfg)
        return run

    def check(self, cfg: Config) -> None:
        """The rules between the sweep's decisions and the user's settings."""
        if not 0 <= self.repeat < cfg.repeats:
            raise ConfigError(
                f"{RUN_NODE}.repeat", f"{self.repeat} is not one of {cfg.repeats} launches", "leave it to the sweeper"
            )
        if self.max_batch is not None and self.max_batch < (cfg.concurrency or 0):
            raise ConfigError(
                f"{RUN_NODE}.max_batch",
                f"{self.max_batch} < concurrency {cfg.concurrency}",
                "drop max_batch or raise it",
            )
        capacity = cfg.engine.max_running_requests
        if capacity is not None and self.max_batch is not None and capacity < self.max_batch:
            raise ConfigError(
                "engine.max_running_requests",
                f"{capacity} < {self.max_batch} requests in flight on this job's server: the server would queue "
                "requests the client counts as running, and the point would lie",
                "raise it or leave it null (specexp then uses the sweep's largest batch or load.max_concurrency)",
            )

    def params(self) -> dict[str, Any]:
        """The sweep's decisions as the point's params record them (MLflow, results.json), by their
        own names: ``repeat`` tells a point's launches apart."""
        return {name: getattr(self, name) for name in SWEEP_DECIDES}

    def capacity(self, cfg: Config) -> int:
        """Requests the server admits at once: engine.max_running_requests, else the largest batch or
        cap of the jobs it serves (this one's, in a single run)."""
        capacity = cfg.engine.max_running_requests or self.max_batch or cfg.concurrency
        if capacity is None:  # refused by Config for engines that launch a server
            raise ConfigError("engine.max_running_requests", "unknown", "set it or load.max_concurrency")
        return capacity

    def capacity_source(self, cfg: Config) -> str:
        """Where ``capacity`` came from, in words for the console."""
        if cfg.engine.max_running_requests:
            return "engine.max_running_requests"
        which = "batch" if cfg.load.kind == "closed" else "load.max_concurrency"
        return f"the largest {which} of this server's jobs" if self.max_batch else which


# What a sweeper decides per job (the ``run`` node's keys); the rest of RunContext follows from the config.
SWEEP_DECIDES = tuple(f.name for f in fields(RunContext) if f.name != "length_tokenizer")


@dataclass(frozen=True)
class Launch:
    """What a server specexp launches is told that the user's config does not say: how many requests
    it admits at once (RunContext.capacity) and the model name it serves (with the launch's id in it,
    so that it proves the server is the one specexp started; the config's name in a plan)."""

    capacity: int
    served_name: str

    @classmethod
    def of(cls, cfg: Config, run: RunContext | None = None, served_name: str | None = None) -> Launch:
        return cls((run or RunContext()).capacity(cfg), served_name or cfg.model.api_name)
