"""The contract every engine adapter fulfils.

An adapter turns the composed config into the server's argv and environment, checks that argv
before anything starts, knows how to read acceptance from its own counters or response fields, and
what extra request fields the engine needs. It never runs a shell string.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from specexp.config import Config, EngineConfig
from specexp.context import Launch
from specexp.engines import counters
from specexp.metrics.acceptance import AcceptanceCounts
from specexp.records import RequestRecord

if TYPE_CHECKING:
    import aiohttp


@dataclass(frozen=True)
class Command:
    """A server process to start: argv (never a shell string) and the variables set on top of ours."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


class Engine:
    """Base adapter; subclasses set ``name`` and ``config_class`` and override what differs."""

    name: ClassVar[str]
    config_class: ClassVar[type[EngineConfig]]
    ready_path: ClassVar[str] = "/v1/models"
    metrics_path: ClassVar[str] = "/metrics"
    # Prefix of vLLM-style spec-decode counters on /metrics (specexp.engines.counters); None: none.
    counter_prefix: ClassVar[str | None] = None

    @classmethod
    def for_config(cls, cfg: Config) -> Engine:
        """The adapter for one point's config (stateless engines ignore it)."""
        return cls()

    def python(self, cfg: Config) -> list[str]:
        """The interpreter (behind any launcher prefix) that runs the engine."""
        return [*cfg.engine.launcher, cfg.engine.python or sys.executable]

    def command(self, cfg: Config, port: int, launch: Launch | None = None) -> Command | None:
        """The server to start on ``port``, sized and named by ``launch`` (None: for this config's
        own load, under its own name); None when the server already runs elsewhere."""
        raise NotImplementedError

    def endpoint(self, cfg: Config, port: int) -> str:
        return f"http://{cfg.engine.host}:{port}"

    def server_env(self, cfg: Config) -> dict[str, str]:
        """Variables every engine gets: the nccl group, then engine.env (later wins)."""
        return {**cfg.nccl.env, **cfg.engine.env}

    def preflight(self, cfg: Config, command: Command | None) -> list[str]:
        """Check argv with the engine's own parser where it is installed (an endpoint specexp does not
        launch, ``command`` None: that it answers); raise ConfigError on a rejected flag. Returns notes
        for the user (settings the engine will change or ignore)."""
        return []

    def version(self, cfg: Config) -> str | None:
        return None

    def headers(self, cfg: Config) -> dict[str, str]:
        return {}

    def request_fields(self, cfg: Config) -> dict[str, Any]:
        """Extra JSON fields for each request, completion or chat (e.g. to get token ids back)."""
        return {}

    def observe(self, event: dict[str, Any], record: RequestRecord) -> None:
        """See each parsed streamed event; keep engine extension fields in ``record.extra``."""

    def drafter_label(self, cfg: Config) -> str:
        """The point's drafter as recorded (results, tags, run name): the drafter group's name."""
        return cfg.drafter.name

    def recorded_params(self, cfg: Config, flat: dict[str, Any]) -> dict[str, Any]:
        """The point's params from its flattened config: the drafter group's fields describe what the
        server was launched with, so they are kept, with the drafter named as recorded."""
        return flat | {"drafter.name": self.drafter_label(cfg)}

    def tags(self, cfg: Config) -> dict[str, str]:
        """Engine facts to tag each run with (e.g. a setting the installed version ignores)."""
        return {}

    async def read_counters(self, http: aiohttp.ClientSession, base_url: str) -> dict[str, float] | None:
        """Cumulative engine counters, read before and after the measured window; None if none."""
        if self.counter_prefix is None:
            return None
        return await counters.scrape(http, base_url + self.metrics_path, self.counter_prefix)

    def acceptance(
        self, before: dict[str, float] | None, after: dict[str, float] | None, records: list[RequestRecord]
    ) -> AcceptanceCounts | None:
        """Raw speculation counts over the measured window (counter deltas); None when unavailable."""
        return counters.acceptance_counts(before, after)

    def request_counts(self, records: list[RequestRecord]) -> AcceptanceCounts | None:
        """Raw speculation counts summed over ``records`` from per-request fields (for a slice of the
        window, such as one prompt category); None when the engine streams none."""
        return None

    async def server_info(self, http: aiohttp.ClientSession, base_url: str) -> dict[str, Any] | None:
        """The engine's resolved configuration, for the run's artifacts."""
        return None
