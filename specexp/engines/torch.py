"""engine=torch: the reference engine (specexp.reference), launched like any other server.

The point's acceptance comes from the measured requests' own counts, streamed in SGLang's shape
(``return_spec_tokens_details``), which also serve slices of the window such as prompt categories and
add up to its counters (vLLM's names under ``specexp:``) exactly over the same requests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from specexp.config import Config, ConfigError, EngineConfig
from specexp.context import Launch
from specexp.engines import synthetic
from specexp.engines.base import Command, Engine
from specexp.engines.sglang import spec_counts as sglang_acceptance
from specexp.metrics.acceptance import AcceptanceCounts
from specexp.records import RequestRecord

# The reference engine runs draft models, EAGLE-3 heads and prompt lookup; EAGLE-1 heads need vLLM or SGLang.
_METHODS = {
    "none": None,
    "draft_model": "draft_model",
    "standalone": "draft_model",
    "eagle3": "eagle3",
    "ngram": "ngram",
}


@dataclass
class TorchEngineConfig(EngineConfig):
    name: str = "torch"
    device: str = "cpu"
    dtype: str = "float32"
    threads: int | None = None  # torch threads in the server; None: torch's default
    seed: int = 0
    startup_timeout_s: float = 180.0

    def default_gpus(self, cfg: Config) -> int:
        return 0 if self.device == "cpu" else 1

    def check(self, cfg: Config) -> None:
        d = cfg.drafter
        if d.method not in _METHODS:
            raise ConfigError(
                "drafter.method",
                f"the reference engine does not run {d.method} drafters",
                "use drafter=tiny, tiny_self, tiny_eagle3 or ngram here, or engine=vllm / engine=sglang for EAGLE-1",
            )
        if d.topk != 1:
            raise ConfigError("drafter.topk", f"the reference engine drafts a chain, not a top-{d.topk} tree", "use 1")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError("engine.dtype", f"unknown dtype {self.dtype!r}", "use float32, bfloat16 or float16")


class TorchEngine(Engine):
    name = "torch"
    config_class = TorchEngineConfig
    ready_path = "/health"
    counter_prefix = "specexp:"

    def command(self, cfg: Config, port: int, launch: Launch | None = None) -> Command:
        e: TorchEngineConfig = cfg.engine
        launch = launch or Launch.of(cfg)
        argv = [
            *self.python(cfg),
            "-m",
            "specexp.reference",
            "--model",
            cfg.model.path,
            "--served-model-name",
            launch.served_name,
            "--host",
            e.host,
            "--port",
            str(port),
            "--max-running-requests",
            str(launch.capacity),
            "--num-continuous-decode-steps",
            str(cfg.decode),
            "--device",
            e.device,
            "--dtype",
            e.dtype,
            "--seed",
            str(e.seed),
        ]
        if e.threads is not None:
            argv += ["--threads", str(e.threads)]
        if cfg.model.max_model_len is not None:
            argv += ["--max-model-len", str(cfg.model.max_model_len)]
        d = cfg.drafter
        if d.speculative:
            argv += ["--speculative-method", _METHODS[d.method], "--num-speculative-tokens", str(d.num_steps)]
            if d.method == "ngram":
                argv += [
                    "--prompt-lookup-min",
                    str(d.prompt_lookup_min),
                    "--prompt-lookup-max",
                    str(d.prompt_lookup_max),
                ]
            else:
                argv += ["--draft-model", d.path]
            if d.schedule is not None:
                argv += ["--schedule", json.dumps(d.schedule)]
            if d.synthetic:
                argv += ["--synthetic-acceptance-rates", json.dumps(d.synthetic_rates)]
        return Command(argv=[*argv, *e.extra_args], env=self.server_env(cfg))

    def request_fields(self, cfg: Config) -> dict[str, Any]:
        return {"return_spec_tokens_details": True} if cfg.drafter.speculative else {}

    def preflight(self, cfg: Config, command: Command | None) -> list[str]:
        return synthetic.notes(cfg.drafter)

    def drafter_label(self, cfg: Config) -> str:
        return synthetic.label(cfg.drafter)

    def tags(self, cfg: Config) -> dict[str, str]:
        return synthetic.tags(cfg.drafter)

    def observe(self, event: dict[str, Any], record: RequestRecord) -> None:
        sglang_acceptance.observe(event, record)

    def acceptance(
        self, before: dict[str, float] | None, after: dict[str, float] | None, records: list[RequestRecord]
    ) -> AcceptanceCounts | None:
        """The measured requests' own counts (a closed loop's fillers add to the counters), else the counters'."""
        return sglang_acceptance.per_request_counts(records) or super().acceptance(before, after, records)

    def request_counts(self, records: list[RequestRecord]) -> AcceptanceCounts | None:
        return sglang_acceptance.per_request_counts(records)

    def version(self, cfg: Config) -> str:
        from specexp import __version__

        return f"specexp-reference {__version__}"
