"""The warm-up phase on a live reference server: ``measure.warmup_windows`` whole windows of requests
reach the server before the first measured window, and none of them is measured."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp

from specexp import servers
from specexp.context import RunContext
from specexp.engines import adapter
from specexp.models.tiny import ensure_tiny
from specexp.point.windows import Window, measure_windows
from tests.conftest import FAST


async def served(engine, base_url: str) -> float:
    """Requests the server has finished since it started (its own counter)."""
    async with aiohttp.ClientSession() as http:
        counters = await engine.read_counters(http, base_url)
    return next(v for k, v in counters.items() if k.endswith("request_success"))


def test_warm_up_windows_reach_the_server_and_are_not_measured(make_config, shared_outputs: Path, tmp_path) -> None:
    ensure_tiny(shared_outputs)
    overrides = [*FAST, "drafter=none", "batch=2", "measure.windows=2", "tracking.enabled=false"]
    cfg = make_config(*overrides, f"outputs={shared_outputs}", "measure.warmup_windows=1")
    engine = adapter(cfg)
    port = servers.free_port(cfg.engine.host)
    base_url = engine.endpoint(cfg, port)
    srv = servers.launch(
        engine.command(cfg, port),
        "warmup-test",
        base_url,
        base_url + engine.ready_path,
        tmp_path / "server.log",
        cfg.engine.startup_timeout_s,
    )
    try:
        for warmup_windows in (1, 0, 2):
            cfg = make_config(*overrides, f"outputs={shared_outputs}", f"measure.warmup_windows={warmup_windows}")
            windows: list[Window] = []
            before, started = asyncio.run(served(engine, base_url)), time.time()
            asyncio.run(measure_windows(cfg, RunContext(), engine, srv, f"warmup{warmup_windows}", windows, []))
            total = asyncio.run(served(engine, base_url)) - before
            # workload.warmup (1) requests, then the warm-up windows (4 requests each), then 2 measured windows
            assert total == 1 + 4 * warmup_windows + 4 * 2, (warmup_windows, total)
            assert len(windows) == 2 and sum(w.metrics["requests_ok"] for w in windows) == 8
            assert started < windows[0].metrics["window_start"] < windows[0].metrics["window_end"]
            assert windows[0].metrics["window_end"] <= windows[1].metrics["window_start"]
    finally:
        srv.process.terminate()
        srv.process.wait(30)
