"""Dataclass schemas for every config group, registered in Hydra's ConfigStore.

Every invalid combination fails here, before any server starts, with a ConfigError that names the
key and the fix. Engine-specific rules live on each engine's config class (``check``), which the
root ``Config`` calls once all groups are composed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING


class ConfigError(ValueError):
    """An invalid setting, named by its dotted key, with how to fix it."""

    def __init__(self, key: str, problem: str, fix: str) -> None:
        super().__init__(f"{key}: {problem}. Fix: {fix}")
        self.key = key


SPEC_METHODS = ("none", "draft_model", "eagle", "eagle3", "mtp", "ngram", "standalone")

# Variables torch.distributed and CUDA read besides NCCL_*; anything else in the nccl group is a typo.
DISTRIBUTED_ENV = frozenset(
    {
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "CUDA_VISIBLE_DEVICES",
        "GLOO_SOCKET_IFNAME",
        "MASTER_ADDR",
        "MASTER_PORT",
        "TORCH_DISTRIBUTED_DEBUG",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "TORCH_NCCL_AVOID_RECORD_STREAMS",
        "TORCH_NCCL_BLOCKING_WAIT",
        "TORCH_NCCL_ENABLE_MONITORING",
        "TORCH_NCCL_HIGH_PRIORITY",
        "TORCH_NCCL_USE_COMM_NONBLOCKING",
    }
)


@dataclass
class EngineConfig:
    """What every engine shares: how to start it and where it listens."""

    name: str = MISSING
    # Interpreter of the environment the engine lives in (None: this one), so GPU stacks stay out of
    # specexp's own environment.
    python: str | None = None
    # argv prefix that starts the server elsewhere: ["srun", "-N1"], a container command, ...
    launcher: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int | None = None  # None: a free port
    startup_timeout_s: float = 600.0
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    # Concurrency the server must admit; None: the largest batch of this server's sweep.
    max_running_requests: int | None = None

    def __post_init__(self) -> None:
        if self.startup_timeout_s <= 0:
            raise ConfigError("engine.startup_timeout_s", "must be > 0", "give a positive number of seconds")
        if self.port is not None and not 0 < self.port < 65536:
            raise ConfigError("engine.port", f"{self.port} is not a TCP port", "use 1-65535, or null for a free one")
        for key in self.env:
            if key.startswith("NCCL_"):
                raise ConfigError(
                    f"engine.env.{key}", "NCCL variables belong to the nccl group", f"use +nccl.env.{key}=... instead"
                )

    def check(self, cfg: Config) -> None:
        """Engine-specific rules over the whole composed config; raise ConfigError."""


@dataclass
class ModelConfig:
    name: str = MISSING
    path: str = MISSING  # a local directory or a hub id
    served_name: str | None = None  # the name clients send; None: name
    tokenizer: str | None = None
    tp: int = 1
    trust_remote_code: bool = False
    max_model_len: int | None = None
    # "tiny": built offline into outputs/ on first use (specexp.models.tiny).
    build: str | None = None

    def __post_init__(self) -> None:
        if self.tp < 1:
            raise ConfigError("model.tp", f"{self.tp} < 1", "use a tensor-parallel size of 1 or more")
        if self.build not in (None, "tiny"):
            raise ConfigError("model.build", f"unknown builder {self.build!r}", "use null or 'tiny'")

    @property
    def api_name(self) -> str:
        return self.served_name or self.name


@dataclass
class DrafterConfig:
    """Speculation: the draft method, its checkpoint and its depth (steps, top-k, draft tokens)."""

    name: str = "none"
    method: str = "none"
    path: str | None = None
    # The model this drafter was trained for (model.name); None: any model.
    target: str | None = None
    num_steps: int = 0  # draft depth: tokens proposed per step along one chain
    topk: int = 1  # branching per draft step (SGLang tree); 1 is a chain
    num_draft_tokens: int | None = None  # verify width, root included; None: num_steps + 1 for a chain
    prompt_lookup_min: int = 1  # ngram
    prompt_lookup_max: int = 3  # ngram
    build: str | None = None  # "tiny": built with model=tiny

    def __post_init__(self) -> None:
        if self.method not in SPEC_METHODS:
            raise ConfigError("drafter.method", f"unknown method {self.method!r}", f"use one of {SPEC_METHODS}")
        if self.method == "none":
            if self.num_steps:
                raise ConfigError(
                    "drafter.num_steps",
                    f"drafter {self.name!r} does not speculate, so a depth of {self.num_steps} means nothing",
                    "pick a speculative drafter (drafter=tiny, ngram, ...) or drop drafter.num_steps",
                )
            return
        if self.num_steps < 1:
            raise ConfigError("drafter.num_steps", f"{self.num_steps} < 1", "speculate at least one step")
        if self.topk < 1:
            raise ConfigError("drafter.topk", f"{self.topk} < 1", "use 1 for a chain or more for a tree")
        if self.method in ("draft_model", "eagle", "eagle3", "standalone") and not self.path:
            raise ConfigError("drafter.path", f"method {self.method} needs a checkpoint", "set drafter.path")
        if self.method == "ngram" and not 1 <= self.prompt_lookup_min <= self.prompt_lookup_max:
            raise ConfigError(
                "drafter.prompt_lookup_min",
                f"need 1 <= min ({self.prompt_lookup_min}) <= max ({self.prompt_lookup_max})",
                "set prompt_lookup_min/max accordingly",
            )
        tokens = self.draft_tokens
        if not 2 <= tokens <= self.num_steps * self.topk + 1:
            raise ConfigError(
                "drafter.num_draft_tokens",
                f"{tokens} does not fit a tree of {self.num_steps} steps x top-{self.topk} "
                f"(between 2 and {self.num_steps * self.topk + 1} tokens, root included)",
                "lower num_draft_tokens or raise num_steps/topk",
            )

    @property
    def speculative(self) -> bool:
        return self.method != "none"

    @property
    def draft_tokens(self) -> int:
        """Verify width, root included; a chain's is num_steps + 1."""
        if self.topk == 1 or self.num_draft_tokens is None:
            return self.num_steps + 1 if self.topk == 1 else self.num_steps * self.topk + 1
        return self.num_draft_tokens


@dataclass
class NcclConfig:
    name: str = "default"
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in self.env:
            if not (key.startswith("NCCL_") or key in DISTRIBUTED_ENV):
                raise ConfigError(
                    f"nccl.env.{key}",
                    "not an NCCL_* or known torch-distributed variable",
                    f"check the spelling; engine.env takes other variables (known: {sorted(DISTRIBUTED_ENV)})",
                )


@dataclass
class WorkloadConfig:
    """What is sent: prompts, lengths, sampling. Prompts are unique per point unless unique=false."""

    name: str = "random"
    kind: str = "random"  # random | builtin | jsonl
    path: str | None = None  # jsonl: one {"prompt": ...} per line
    num_prompts: int | None = None  # measured requests per point; None: max(8, 4 x batch)
    warmup: int | None = None  # warm-up requests per point; None: batch
    input_len: int = 64  # random: prompt tokens
    output_len: int = 64  # max_tokens
    ignore_eos: bool = True
    temperature: float = 0.0
    token_range: list[int] = field(default_factory=lambda: [100, 1000])  # random: ids drawn from [lo, hi)
    unique: bool = True  # never send the same prompt twice to a server within a sweep
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("random", "builtin", "jsonl"):
            raise ConfigError("workload.kind", f"unknown kind {self.kind!r}", "use random, builtin or jsonl")
        if self.kind == "jsonl" and not self.path:
            raise ConfigError(
                "workload.path", "a jsonl workload needs a file", "set workload.path=/path/to/prompts.jsonl"
            )
        if self.output_len < 1:
            raise ConfigError("workload.output_len", f"{self.output_len} < 1", "ask for at least one token")
        if self.input_len < 1:
            raise ConfigError("workload.input_len", f"{self.input_len} < 1", "send at least one prompt token")
        if self.num_prompts is not None and self.num_prompts < 1:
            raise ConfigError("workload.num_prompts", f"{self.num_prompts} < 1", "measure at least one request")
        if self.temperature < 0:
            raise ConfigError("workload.temperature", "negative", "use 0 (greedy) or more")
        lo, hi = self.token_range
        if not 0 <= lo < hi:
            raise ConfigError("workload.token_range", f"[{lo}, {hi}) is empty", "use [lo, hi) with 0 <= lo < hi")

    def measured(self, batch: int) -> int:
        return self.num_prompts if self.num_prompts is not None else max(8, 4 * batch)

    def warmups(self, batch: int) -> int:
        return batch if self.warmup is None else self.warmup


@dataclass
class TrackingConfig:
    enabled: bool = True
    uri: str = MISSING  # default sqlite:///<outputs>/mlflow.db (conf/tracking/mlflow.yaml)
    experiment: str = "specexp"
    # Seconds between MLflow's system-metrics samples (CPU, memory, GPUs) in each point's measured
    # window; 0 turns them off.
    system_metrics_interval_s: float = 1.0

    def __post_init__(self) -> None:
        if self.system_metrics_interval_s < 0:
            raise ConfigError(
                "tracking.system_metrics_interval_s", "must be >= 0", "give seconds between samples, or 0 for none"
            )


@dataclass
class Config:
    engine: Any = MISSING
    model: ModelConfig = MISSING
    drafter: DrafterConfig = MISSING
    nccl: NcclConfig = MISSING
    workload: WorkloadConfig = MISSING
    tracking: TrackingConfig = MISSING
    batch: int = 1  # closed-loop concurrency
    # Decode steps run back to back before the scheduler admits waiting requests (SGLang's
    # --num-continuous-decode-steps). A plain value, not a config group: Hydra cannot select a
    # group option by a number, and `decode=4` is what users type.
    decode: int = 1
    repeats: int = 1  # measurements of this point on the same server, each with fresh prompts
    # auto: a sweep's speculative point without a drafter=none point of the same settings gets one
    # added (a speedup needs it); off: exactly the points asked for.
    baseline: str = "auto"
    request_timeout_s: float = 600.0
    dry_run: bool = False
    outputs: str = MISSING  # where mlflow.db, optuna.db and built models live
    sweep_id: str | None = None  # set by specexp's sweepers; shared by the jobs of one multirun
    run_name: str | None = None  # the point's MLflow run; sweepers name it by the axes that vary
    # The largest batch this job's server must take; set by the sweeper over jobs sharing a server.
    max_batch: int | None = None

    def __post_init__(self) -> None:
        if self.batch < 1:
            raise ConfigError("batch", f"{self.batch} < 1", "use a concurrency of 1 or more, e.g. batch=1,4,8,16 -m")
        if self.decode < 1:
            raise ConfigError("decode", f"{self.decode} < 1", "use decode=1 (the default) or more")
        if self.baseline not in ("auto", "off"):
            raise ConfigError("baseline", f"unknown value {self.baseline!r}", "use auto (the default) or off")
        if self.repeats < 1:
            raise ConfigError("repeats", f"{self.repeats} < 1", "measure each point at least once")
        if self.max_batch is not None and self.max_batch < self.batch:
            raise ConfigError("max_batch", f"{self.max_batch} < batch {self.batch}", "drop max_batch or raise it")
        capacity = self.engine.max_running_requests
        if capacity is not None and capacity < self.capacity_needed:
            raise ConfigError(
                "engine.max_running_requests",
                f"{capacity} < batch {self.capacity_needed}: the server would queue requests and the point would lie",
                "raise it or leave it null (specexp then uses the sweep's largest batch)",
            )
        d = self.drafter
        if d.target is not None and d.target != self.model.name:
            raise ConfigError(
                "drafter",
                f"drafter {d.name!r} was built for model {d.target!r}, not {self.model.name!r}",
                f"use model={d.target} or a drafter for {self.model.name}",
            )
        self.engine.check(self)

    @property
    def capacity_needed(self) -> int:
        return self.max_batch or self.batch

    @property
    def capacity(self) -> int:
        """Requests the server admits at once: at least the largest batch it will see."""
        return self.engine.max_running_requests or self.capacity_needed


@dataclass
class TuneConf:
    """hydra.sweeper keys for ``mode: optuna``, named as hydra-optuna-sweeper names them."""

    n_trials: int = 12  # the study's total: a rerun resumes up to it
    timeout: float | None = None  # seconds for this invocation
    storage: str | None = None  # None: sqlite:///<outputs>/optuna.db; or any SQLAlchemy URL, or journal:///path
    study_name: str = "specexp"
    direction: Any = "maximize"  # or a list, one per objective
    objective: Any = "output_throughput"  # a metric key (specexp.metrics.registry), or a list of them
    constraints: list[str] = field(default_factory=list)  # e.g. ["ttft_ms_p99 <= 500"]
    sampler: str = "tpe"
    seed: int | None = 0
    conditions: dict[str, str] = field(default_factory=dict)  # key -> "other.key > 1"
    batches: list[int] | None = None  # measure each trial at these batch sizes (one objective per batch)


@dataclass
class SweeperConf(TuneConf):
    """specexp's sweeper (``hydra/sweeper=specexp``): a server-ordered grid (``mode: grid``) or an
    Optuna study (``mode: optuna``). One sweeper for both, because a preset cannot replace the sweeper
    the primary config selects."""

    _target_: str = "hydra_plugins.specexp_sweepers.SpecexpSweeper"
    mode: str = "grid"
    max_batch_size: int | None = None
    params: dict[str, str] = field(default_factory=dict)
