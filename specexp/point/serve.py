"""A point's server: launched under a name that proves its identity, or reused when the last point's
server has the same key (specexp.servers); what it is (startup time, version, tags) comes back typed
for the record. Where its log goes is decided first, so a launch that fails still leaves its log.
The launch's size and served name travel beside the config (specexp.context.Launch), never in it."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp

from specexp import live, servers, tracking
from specexp.config import Config
from specexp.context import Launch, RunContext
from specexp.engines.base import Command, Engine
from specexp.point.plan import ServerPlan, server_label

log = logging.getLogger("specexp")


@dataclass(frozen=True)
class ServerLog:
    """The log of the launch a point asks for (its id names the log and the served model), and where
    this point's slice of it starts."""

    launch: str
    path: Path
    start: int = 0


def planned_log(cfg: Config, key: str) -> ServerLog:
    """A new launch's id and log file under ``outputs/servers``."""
    launch = servers.launch_id()
    path = Path(cfg.outputs).resolve() / "servers" / f"{time.strftime('%Y%m%d-%H%M%S')}-{key}-{launch}.log"
    return ServerLog(launch, path)


@dataclass
class Served:
    """The server a point measures, where its log slice starts, and what the point records of it."""

    srv: servers.Server
    log: ServerLog
    command: Command | None  # the argv shown in server.json (None: not launched by specexp)
    info: dict[str, Any] | None  # the engine's own description of a new launch (server_info.json)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


def serve(cfg: Config, run: RunContext, plan: ServerPlan, planned: ServerLog) -> Served:
    """The point's server, ready: launched (under a served name carrying the launch id, proven at
    readiness) or reused; raises ServerStartError with its log when it does not come up."""
    engine = plan.engine
    port = cfg.engine.port or servers.free_port(cfg.engine.host)
    base_url = engine.endpoint(cfg, port)
    identity, launch = None, None
    if plan.command is not None:
        identity = servers.Identity(base_url + "/v1/models", f"{cfg.model.api_name}@{planned.launch}")
        launch = Launch.of(cfg, run, identity.served_name)
    with live.server_launch(server_label(cfg)) as ready:
        srv, reused = servers.acquire(
            plan.key if cfg.repeats == 1 else f"{plan.key}/launch{run.repeat}",  # each round of repeats: a fresh launch
            engine.command(cfg, port, launch),
            base_url,
            base_url + engine.ready_path,
            planned.path,
            cfg.engine.startup_timeout_s,
            engine.headers(cfg),
            identity,
            cfg.engine.stall_s,
        )
        ready(srv.startup_s, reused)
    served = Served(srv, planned, srv.command or plan.command, None)
    if reused:
        served.log = replace(planned, path=srv.log_path or planned.path, start=srv.log_size())
    else:
        served.metrics["server_startup_s"] = srv.startup_s
        if plan.command is not None and cfg.load.kind == "rate":  # no batch says how it was sized
            log.info("server limit on running requests: %d (%s)", run.capacity(cfg), run.capacity_source(cfg))
        served.info = asyncio.run(fetch_server_info(engine, cfg, srv.base_url))
    if srv.version is None:  # asked once per server: it may start the engine's interpreter
        srv.version = engine.version(cfg) or "unknown"
    served.tags = {
        "specexp.server_reused": str(reused).lower(),
        "specexp.engine_version": srv.version,
        "specexp.host_cpus": str(os.cpu_count()),
        "specexp.hardware": tracking.hardware(),  # what a stored required-acceptance map is matched by
        **engine.tags(cfg),
    }
    return served


async def fetch_server_info(engine: Engine, cfg: Config, base_url: str) -> dict[str, Any] | None:
    """What the engine says of itself (its /server_info or the like); the error when it cannot."""
    async with aiohttp.ClientSession(headers=engine.headers(cfg)) as http:
        try:
            return await engine.server_info(http, base_url)
        except aiohttp.ClientError as exc:
            return {"error": str(exc)}
