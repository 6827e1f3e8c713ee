"""The root config: every group composed, and the rules across groups that no single group can check."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from specexp.config.engine import DrafterConfig, ModelConfig, NcclConfig
from specexp.config.errors import ConfigError
from specexp.config.measure import ARMS, LoadConfig, MeasureConfig, SloConfig, TrackingConfig
from specexp.config.workload import WorkloadConfig


@dataclass
class Config:
    engine: Any = MISSING
    model: ModelConfig = MISSING
    drafter: DrafterConfig = MISSING
    nccl: NcclConfig = MISSING
    workload: WorkloadConfig = MISSING
    tracking: TrackingConfig = MISSING
    load: LoadConfig = field(default_factory=LoadConfig)  # closed loop unless a load= group says otherwise
    slo: SloConfig = field(default_factory=SloConfig)
    measure: MeasureConfig = field(default_factory=MeasureConfig)
    batch: int = 1  # closed-loop concurrency
    rate: float | None = None  # open-loop requests/s (load=rate reads it as load.rate)
    # Decode steps run back to back before the scheduler admits waiting requests (SGLang's
    # --num-continuous-decode-steps). A plain value, not a config group: Hydra cannot select a
    # group option by a number, and `decode=4` is what users type.
    decode: int = 1
    # Server launches per point in a multirun, interleaved (A B A B ...) so slow drift of the machine
    # hits every arm alike; each launch is its own job with its own windows.
    repeats: int = 1
    # How a sweep's servers (its arms: drafter=none,tiny) take turns. alternate: every server of a
    # round is up at once and at each load the arms' windows alternate (A B A B), so the machine's
    # drift between two arms is one window long, not half the sweep; sequential: one server at a
    # time (A1 A4 B1 B4); auto: alternate where the servers take no GPU and no fixed port, up to 4
    # of them (each holds its model in memory), unless a parallel launcher runs groups side by side.
    arms: str = "auto"
    # auto: a sweep's speculative point without a drafter=none point of the same settings gets one
    # added (a speedup needs it); off: exactly the points asked for.
    baseline: str = "auto"
    # Seconds a request may take before the client gives up on it (counted failed).
    request_timeout_s: float = 600.0
    # Print each server's argv and environment, and the points planned; start nothing.
    dry_run: bool = False
    outputs: str = MISSING  # where mlflow.db, optuna.db and built models live
    # A sweep to finish (its id, or "latest"): points that finished ok are kept, the rest run again.
    resume: str | None = None

    def __post_init__(self) -> None:
        if self.batch < 1:
            raise ConfigError("batch", f"{self.batch} < 1", "use a concurrency of 1 or more, e.g. batch=1,4,8,16 -m")
        if self.decode < 1:
            raise ConfigError("decode", f"{self.decode} < 1", "use decode=1 (the default) or more")
        if self.baseline not in ("auto", "off"):
            raise ConfigError("baseline", f"unknown value {self.baseline!r}", "use auto (the default) or off")
        if self.repeats < 1:
            raise ConfigError("repeats", f"{self.repeats} < 1", "launch each point at least once")
        if self.arms not in ARMS:
            raise ConfigError("arms", f"unknown value {self.arms!r}", f"use one of {', '.join(ARMS)}")
        if self.arms == "alternate" and self.engine.port is not None:
            raise ConfigError(
                "arms",
                f"alternating arms run their servers at once, and engine.port={self.engine.port} fits one",
                "leave engine.port null (every server gets a free port), or use arms=sequential",
            )
        if self.rate is not None and self.load.kind == "closed":
            raise ConfigError("rate", "a closed loop (load=closed) has no request rate", "add load=rate, or drop rate")
        if self.load.kind == "rate" and self.batch != 1:
            raise ConfigError(
                "batch",
                "an open loop (load=rate) has no batch",
                "drop batch; cap concurrency with load.max_concurrency",
            )
        capacity = self.engine.max_running_requests
        if capacity is not None and capacity < (self.concurrency or 0):
            raise ConfigError(
                "engine.max_running_requests",
                f"{capacity} < {self.concurrency} requests in flight: the server would queue requests the "
                "client counts as running, and the point would lie",
                "raise it or leave it null (specexp then uses the sweep's largest batch or load.max_concurrency)",
            )
        if self.engine.launches_server and capacity is None and self.concurrency is None:
            raise ConfigError(
                "load.max_concurrency",
                "an open loop without a cap leaves the server's limit on running requests unknown",
                "cap it (load.max_concurrency=16: the client's cap and the server's limit) or size the server "
                "(engine.max_running_requests=64: arrivals beyond it queue in the server)",
            )
        d = self.drafter
        if d.target is not None and d.target != self.model.name:
            raise ConfigError(
                "drafter",
                f"drafter {d.name!r} was built for model {d.target!r}, not {self.model.name!r}",
                f"use model={d.target} or a drafter for {self.model.name}",
            )
        if d.adaptive_verification and self.engine.name != "vllm":
            raise ConfigError(
                "drafter.adaptive_verification",
                f"it is vLLM's enable_adaptive_verification; engine {self.engine.name} has no such mode",
                "use engine=vllm on a GPU, or drop it (drafter.schedule sets a depth per batch on every engine)",
            )
        schedule = d.depth_schedule
        if schedule is not None and self.engine.launches_server and schedule.max_batch < self.capacity:
            raise ConfigError(
                "drafter.schedule",
                f"it ends at batch {schedule.max_batch} but the server admits {self.capacity} running requests "
                f"({self.capacity_source})",
                f"extend its last range to {self.capacity}",
            )
        self.engine.check(self)

    @property
    def concurrency(self) -> int | None:
        """Requests in flight at most: the batch, or an open loop's cap (None: uncapped)."""
        return self.batch if self.load.kind == "closed" else self.load.max_concurrency

    @property
    def streams(self) -> int:
        """The load's size in streams: the batch, or the rate rounded up within the cap (else the
        server's limit). Warm-up runs at it and the default request counts scale with it."""
        if self.load.kind == "closed":
            return self.batch
        return min(math.ceil(self.load.rate), self.concurrency or self.engine.max_running_requests or math.inf)

    @property
    def gpus(self) -> int:
        """GPUs this point's server takes: engine.gpus, else what the engine derives from the model."""
        return self.engine.gpus if self.engine.gpus is not None else self.engine.default_gpus(self)

    @property
    def capacity(self) -> int:
        """Requests the server admits at once for this job's own load: engine.max_running_requests,
        else the batch or cap. A sweep may size a shared server larger (specexp.context.RunContext)."""
        capacity = self.engine.max_running_requests or self.concurrency
        if capacity is None:  # refused in __post_init__ for engines that launch a server
            raise ConfigError("engine.max_running_requests", "unknown", "set it or load.max_concurrency")
        return capacity

    @property
    def capacity_source(self) -> str:
        """Where ``capacity`` came from, in words for the console."""
        if self.engine.max_running_requests:
            return "engine.max_running_requests"
        return "batch" if self.load.kind == "closed" else "load.max_concurrency"
