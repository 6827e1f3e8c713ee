"""engine=external: measure an OpenAI-compatible endpoint that is already running.

Nothing is launched or torn down. The API key comes from the environment variable whose *name* is
in the config, so the key itself never reaches params, logs or artifacts. Before anything is measured
the endpoint must answer within seconds and list ``engine.model_name`` on ``/v1/models`` (else one
line, exit 2).

``engine.flavor`` says what serves it (``auto``: asked of the server: ``/metrics`` families, then
``/get_server_info`` / ``/server_info``, then ``/version``), and an external vLLM, SGLang or reference
engine is then measured as a launched one is: the same request fields (token ids, per-request
acceptance), acceptance counters and latency histograms, through that engine's own adapter. A plain
OpenAI endpoint is measured with what it offers; what it cannot give is named in the tag
``specexp.unavailable``. The drafter is whatever the server runs: ``engine.drafter`` names it as the
user states it (``unknown`` by default), never a preset's name.
"""

from __future__ import annotations

import functools
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from specexp.config import Config, ConfigError, EngineConfig
from specexp.context import Launch
from specexp.engines.base import Command, Engine
from specexp.engines.sglang import SglangEngine
from specexp.engines.sglang import spec_counts as sglang_acceptance
from specexp.engines.torch import TorchEngine
from specexp.engines.vllm import VllmEngine
from specexp.metrics.acceptance import AcceptanceCounts
from specexp.records import RequestRecord

if TYPE_CHECKING:
    import aiohttp

FLAVORS = ("auto", "vllm", "sglang", "specexp", "openai")
PROBE_TIMEOUT_S = 5.0
# The engine each flavor is measured as, and the fields its requests carry (SGLang refuses
# return_token_ids on streamed chat; the reference engine takes both).
AS_ENGINE: dict[str, type[Engine]] = {"vllm": VllmEngine, "sglang": SglangEngine, "specexp": TorchEngine}
FIELDS: dict[str, dict[str, Any]] = {
    "vllm": {"return_token_ids": True},
    "sglang": {"return_spec_tokens_details": True},
    "specexp": {"return_token_ids": True, "return_spec_tokens_details": True},
    "openai": {},
}
UNAVAILABLE = {
    "vllm": (),
    "sglang": ("token_ids",),
    "specexp": (),
    "openai": ("token_ids", "acceptance", "server_latency"),
}
# /metrics prefix -> flavor
PREFIXES = {"vllm:": "vllm", "sglang:": "sglang", "specexp:": "specexp"}


@dataclass
class ExternalEngineConfig(EngineConfig):
    name: str = "external"
    url: str = ""  # base URL, e.g. http://gpu-box:8000 (no /v1)
    model_name: str | None = None  # the name the endpoint serves; None: model.served_name or model.name
    api_key_env: str | None = None  # name of the variable holding the key (sent as a Bearer token)
    request_extra: dict[str, Any] = field(default_factory=dict)  # extra JSON fields for every request
    flavor: str = "auto"  # vllm | sglang | specexp (the reference engine) | openai | auto (asked of the server)
    drafter: str = "unknown"  # the speculation the server runs, as you state it: recorded as the point's drafter
    startup_timeout_s: float = 30.0
    launches_server: ClassVar[bool] = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.flavor not in FLAVORS:
            raise ConfigError("engine.flavor", f"unknown flavor {self.flavor!r}", f"use one of {', '.join(FLAVORS)}")

    def default_gpus(self, cfg: Config) -> int:
        return 0  # nothing is launched here

    def check(self, cfg: Config) -> None:
        cfg.drafter.refuse_synthetic("specexp does not launch this server, so it cannot set how it accepts")
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError("engine.url", f"{self.url!r} is not an http(s) URL", "set engine.url=http://host:port")
        if self.api_key_env and self.api_key_env not in os.environ:
            raise ConfigError(
                "engine.api_key_env", f"${self.api_key_env} is not set", f"export {self.api_key_env}=<key> first"
            )


def _get(url: str, headers: dict[str, str]) -> tuple[int, str]:
    """(status, body) of a GET within PROBE_TIMEOUT_S; raises OSError when nothing answers."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=PROBE_TIMEOUT_S) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


@functools.cache
def detect(url: str, auth: tuple[tuple[str, str], ...] = ()) -> tuple[str, str]:
    """(flavor, the evidence) of the server at ``url``: its /metrics families, else its server-info
    endpoints, else /version; ``openai`` when none says more. Asked once per process."""
    headers = dict(auth)
    try:
        status, text = _get(url + "/metrics", headers)
        for prefix, flavor in PREFIXES.items():
            if status == 200 and f"\n{prefix}" in f"\n{text}":
                return flavor, f"/metrics has {prefix} series"
        for path in ("/get_server_info", "/server_info"):
            status, text = _get(url + path, headers)
            info = _json(text) if status == 200 else None
            if isinstance(info, dict) and ("vllm_config" in info or "vllm" in text[:2000].lower()):
                return "vllm", f"{path} describes a vLLM config"
            if isinstance(info, dict) and {"model_path", "tp_size"} <= info.keys():
                return "sglang", f"{path} describes an SGLang server"
        status, text = _get(url + "/version", headers)
        version = _json(text) if status == 200 else None
        if isinstance(version, dict) and "version" in version:
            return "vllm", f"/version answers {version['version']} as vLLM does"
    except OSError:
        pass
    return "openai", "no /metrics, server info or /version names an engine"


class ExternalEngine(Engine):
    name = "external"
    config_class = ExternalEngineConfig

    def __init__(self, cfg: Config | None = None) -> None:
        self.cfg = cfg  # the point's config: which server it is is asked only once it is measured

    @classmethod
    def for_config(cls, cfg: Config) -> ExternalEngine:
        return cls(cfg)

    def command(self, cfg: Config, port: int, launch: Launch | None = None) -> Command | None:
        return None

    def endpoint(self, cfg: Config, port: int) -> str:
        return cfg.engine.url.rstrip("/")

    def headers(self, cfg: Config) -> dict[str, str]:
        env = cfg.engine.api_key_env
        return {"Authorization": f"Bearer {os.environ[env]}"} if env else {}

    def model(self, cfg: Config) -> str:
        return cfg.engine.model_name or cfg.model.api_name

    def flavor(self, cfg: Config) -> str:
        if cfg.engine.flavor != "auto":
            return cfg.engine.flavor
        return detect(self.endpoint(cfg, 0), self._auth(cfg))[0]

    def _auth(self, cfg: Config) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self.headers(cfg).items()))

    @functools.cached_property
    def _flavored(self) -> Engine | None:
        """The adapter of the engine the endpoint was found to be; None for a plain OpenAI endpoint."""
        kind = AS_ENGINE.get(self.flavor(self.cfg)) if self.cfg is not None else None
        return kind() if kind else None

    def preflight(self, cfg: Config, command: Command | None) -> list[str]:
        """The endpoint answers within seconds and serves ``engine.model_name``; ConfigError otherwise.
        Notes what it was found to be and what it cannot give."""
        url, name = self.endpoint(cfg, 0), self.model(cfg)
        try:
            status, text = _get(url + "/v1/models", self.headers(cfg))
        except OSError as exc:
            reason = getattr(exc, "reason", exc)
            raise ConfigError(
                "engine.url",
                f"{url} does not answer within {PROBE_TIMEOUT_S:.0f} s ({reason})",
                "start the server or fix engine.url",
            ) from None
        if status in (401, 403):
            raise ConfigError("engine.api_key_env", f"{url} refuses the key (HTTP {status})", "set the right key")
        listing = _json(text) if status == 200 else None
        if not isinstance(listing, dict) or not isinstance(listing.get("data"), list):
            raise ConfigError(
                "engine.url", f"{url}/v1/models answers HTTP {status}, not a model list", "fix engine.url"
            )
        served = [str(card.get("id")) for card in listing["data"] if isinstance(card, dict)]
        if name not in served:
            raise ConfigError(
                "engine.model_name",
                f"{url} serves {', '.join(served) or 'no model'}, not {name!r}",
                f"set engine.model_name={served[0]}" if served else "load a model on that server",
            )
        flavor = self.flavor(cfg)
        how = "set by engine.flavor" if cfg.engine.flavor != "auto" else detect(url, self._auth(cfg))[1]
        missing = UNAVAILABLE[flavor]
        notes = [f"engine=external: {url} is measured as {flavor} ({how})"]
        if missing:
            notes.append(f"engine=external: unavailable from a {flavor} endpoint: {', '.join(missing)}")
        return notes

    def drafter_label(self, cfg: Config) -> str:
        return cfg.engine.drafter

    def recorded_params(self, cfg: Config, flat: dict[str, Any]) -> dict[str, Any]:
        """Nothing was launched, so the drafter group's preset fields (method, path, depth) describe
        nothing the server runs: only the drafter as the user states it is recorded."""
        kept = {k: v for k, v in flat.items() if not k.startswith("drafter.")}
        return kept | {"drafter.name": self.drafter_label(cfg)}

    def tags(self, cfg: Config) -> dict[str, str]:
        flavor = self.flavor(cfg)
        tags = {"specexp.external_flavor": flavor, "specexp.drafter": cfg.engine.drafter}
        if UNAVAILABLE[flavor]:
            tags["specexp.unavailable"] = ",".join(UNAVAILABLE[flavor])
        return tags

    def request_fields(self, cfg: Config) -> dict[str, Any]:
        e: ExternalEngineConfig = cfg.engine
        return {"model": self.model(cfg), **FIELDS[self.flavor(cfg)], **e.request_extra}

    def observe(self, event: dict[str, Any], record: RequestRecord) -> None:
        sglang_acceptance.observe(event, record)  # SGLang's per-request fields (the reference engine's too)

    async def read_counters(self, http: aiohttp.ClientSession, base_url: str) -> dict[str, float] | None:
        """The counters and histograms of the engine it was found to be; None for a plain endpoint."""
        import aiohttp  # loaded by now (http is its session); not on the command line's light path

        engine = self._flavored
        if engine is None:
            return None
        try:
            return await engine.read_counters(http, base_url)
        except aiohttp.ClientError:
            return None

    def acceptance(
        self, before: dict[str, float] | None, after: dict[str, float] | None, records: list[RequestRecord]
    ) -> AcceptanceCounts | None:
        engine = self._flavored
        return engine.acceptance(before, after, records) if engine else None

    def request_counts(self, records: list[RequestRecord]) -> AcceptanceCounts | None:
        engine = self._flavored
        return engine.request_counts(records) if engine else None

    async def server_info(self, http: aiohttp.ClientSession, base_url: str) -> dict[str, Any] | None:
        engine = self._flavored
        return await engine.server_info(http, base_url) if engine else None
