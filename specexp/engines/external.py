"""engine=external: measure an OpenAI-compatible endpoint that is already running.

Nothing is launched or torn down. The API key comes from the environment variable whose *name* is
in the config, so the key itself never reaches params, logs or artifacts. Acceptance is read from
vLLM-style counters on the server's /metrics when it has them, else from SGLang's per-request
fields, else it is marked unavailable (tag ``specexp.acceptance``).

"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

import aiohttp

from specexp.config import Config, ConfigError, EngineConfig
from specexp.engines import counters
from specexp.engines.base import Command, Engine
from specexp.engines.sglang import acceptance as sglang_acceptance
from specexp.metrics.acceptance import AcceptanceCounts
from specexp.records import RequestRecord

COUNTER_PREFIXES = ("vllm:", "specexp:")


@dataclass
class ExternalEngineConfig(EngineConfig):
    name: str = "external"
    url: str = ""  # base URL, e.g. http://gpu-box:8000 (no /v1)
    model_name: str | None = None  # the name the endpoint serves; None: model.served_name or model.name
    api_key_env: str | None = None  # name of the variable holding the key (sent as a Bearer token)
    request_extra: dict[str, Any] = field(default_factory=dict)  # extra JSON fields for every request
    startup_timeout_s: float = 30.0
    launches_server: ClassVar[bool] = False

    def default_gpus(self, cfg: Config) -> int:
        return 0  # nothing is launched here

    def check(self, cfg: Config) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError("engine.url", f"{self.url!r} is not an http(s) URL", "set engine.url=http://host:port")
        if self.api_key_env and self.api_key_env not in os.environ:
            raise ConfigError(
                "engine.api_key_env", f"${self.api_key_env} is not set", f"export {self.api_key_env}=<key> first"
            )


class ExternalEngine(Engine):
    name = "external"
    config_class = ExternalEngineConfig

    def command(self, cfg: Config, port: int) -> Command | None:
        return None

    def endpoint(self, cfg: Config, port: int) -> str:
        return cfg.engine.url.rstrip("/")

    def headers(self, cfg: Config) -> dict[str, str]:
        env = cfg.engine.api_key_env
        return {"Authorization": f"Bearer {os.environ[env]}"} if env else {}

    def request_fields(self, cfg: Config) -> dict[str, Any]:
        e: ExternalEngineConfig = cfg.engine
        return {"model": e.model_name or cfg.model.api_name, **e.request_extra}

    def observe(self, event: dict[str, Any], record: RequestRecord) -> None:
        sglang_acceptance.observe(event, record)  # SGLang's per-request fields, when present

    async def read_counters(self, http: aiohttp.ClientSession, base_url: str) -> dict[str, float] | None:
        """vLLM's counters, or the reference engine's (same names, ``specexp:`` prefix)."""
        try:
            async with http.get(base_url + self.metrics_path) as resp:
                resp.raise_for_status()
                text = await resp.text()
        except aiohttp.ClientError:  # no /metrics
            return None
        for prefix in COUNTER_PREFIXES:
            found = counters.parse(text, prefix)
            if counters.DRAFTS in found or counters.VERIFY_STEPS in found:
                return found
        return None

    def acceptance(
        self, before: dict[str, float] | None, after: dict[str, float] | None, records: list[RequestRecord]
    ) -> AcceptanceCounts | None:
        return counters.acceptance_counts(before, after) or sglang_acceptance.per_request_counts(records)

    def request_counts(self, records: list[RequestRecord]) -> AcceptanceCounts | None:
        return sglang_acceptance.per_request_counts(records)
