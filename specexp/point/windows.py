"""A point's measurement: warm-up, then measured windows until enough (specexp.metrics.window_results), each
under the watchdog (specexp.point.watch), and their metrics folded into the point's result. Every
record is kept as it arrives, so a point cut short by the engine's death keeps what it got."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import aiohttp

from specexp import live, servers
from specexp.config import Config
from specexp.context import RunContext
from specexp.engines.base import Engine
from specexp.load.client import run_closed_loop, run_open_loop
from specexp.load.conversation import Conversation
from specexp.load.host import CLIENT_CPU_WARNING, HostSample, noise
from specexp.load.prompts import make_prompts
from specexp.load.send_plan import arrivals, window_items
from specexp.load.shape import RequestShape, request_shape
from specexp.metrics import requests, slo, traffic
from specexp.metrics import server as server_metrics
from specexp.metrics.acceptance import acceptance_metrics
from specexp.metrics.categories import category_metrics
from specexp.metrics.joint_stop import Alone, Stopped, Stopping
from specexp.metrics.window_results import aggregate
from specexp.point.plan import load_label
from specexp.point.watch import ServerLost, watched
from specexp.records import RequestRecord
from specexp.result import PointResult

log = logging.getLogger("specexp")

Counters = dict[str, float] | None


@dataclass
class Window:
    """One measured window: its records and its metrics (requests, traffic, SLOs, acceptance, noise context)."""

    records: list[RequestRecord]
    metrics: dict[str, float]


@dataclass
class Collected:
    """What a point's windows gave so far: the finished windows, and the records of the one in progress."""

    windows: list[Window] = field(default_factory=list)
    received: list[RequestRecord] = field(default_factory=list)

    @property
    def records(self) -> list[RequestRecord]:
        """Every record, in order: the finished windows', then what the window in progress received
        (the warm-up's first, as they ended)."""
        in_progress = sorted(self.received, key=lambda r: (not r.warmup, 0 if r.warmup else r.index))
        return [r for m in self.windows for r in m.records] + in_progress


@dataclass
class Session:
    """What every request of a point's windows shares: its settings, engine, server, HTTP session,
    request shape and prompt stream."""

    cfg: Config
    run: RunContext
    engine: Engine
    srv: servers.Server
    http: aiohttp.ClientSession
    shape: RequestShape
    stream: str

    def watched(self, work: Awaitable[list[RequestRecord]], phase: str) -> Awaitable[list[RequestRecord]]:
        return watched(work, self.srv, phase, self.cfg.engine.stall_s)

    def counters(self, phase: str) -> Awaitable[Counters]:
        read = self.engine.read_counters(self.http, self.srv.base_url)
        return watched(read, self.srv, phase, self.cfg.engine.stall_s, True)


async def measure_windows(
    cfg: Config,
    run: RunContext,
    engine: Engine,
    srv: servers.Server,
    stream: str,
    windows: list[Window],
    received: list[RequestRecord],
    window: Callable[[], AbstractContextManager[None]] = nullcontext,
    stopping: Stopping | None = None,
) -> None:
    """Warm-up (``workload.warmup`` requests, then ``measure.warmup_windows`` discarded windows), then
    consecutive windows until ``stopping`` says enough (default: the point alone, on its own output
    throughput; arms taking turns stop together on their speedups: specexp.metrics.joint_stop), each
    inside ``window`` (which raises Stopped where the arms stopped while this one waited for its go):
    counters, the measured requests on fresh prompts (closed or open loop), counters, and the host's
    noise context. Windows are appended as they finish, and each record of the window in
    progress joins ``received`` as it finishes, so a point cut short by the server's death keeps
    everything it got."""
    w = cfg.workload
    shape = request_shape(w, srv.served_name or cfg.model.api_name, engine.request_fields(cfg))
    timeout = aiohttp.ClientTimeout(total=cfg.request_timeout_s)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(headers=engine.headers(cfg), timeout=timeout, connector=connector) as http:
        session = Session(cfg, run, engine, srv, http, shape, stream)
        # each warm-up record joins ``received`` as it ends (a point that ends in warm-up keeps them), and
        # is kept in records.jsonl (marked warmup) with the first window's, in no metric
        warmed = await _warm_up(session, received.append)
        start = time.monotonic()
        rule = stopping or Alone(cfg.measure)
        while rule.more([m.metrics for m in windows], time.monotonic() - start):
            index = len(windows)
            seed = (cfg.load.seed, run.repeat, index)
            items = window_items(cfg, f"{stream}/window{index}", seed, tokenizer=run.length_tokenizer)
            try:
                with window():
                    records, before, after, context = await _one_window(session, items, index, received)
            except Stopped:
                return
            for record in records:
                record.window = index
            received.clear()  # this window's records now live in its Window
            windows.append(
                Window([*warmed, *records], window_metrics(session, index, records, before, after) | context)
            )
            warmed = []


async def _warm_up(session: Session, keep: Callable[[RequestRecord], None]) -> list[RequestRecord]:
    """``workload.warmup`` requests, then whole windows at the point's concurrency: all discarded
    from the metrics; each record passed to ``keep`` as it ends."""
    cfg, w = session.cfg, session.cfg.workload
    warm = make_prompts(w, w.warmups(cfg.streams), f"{session.stream}/warmup", True, session.run.length_tokenizer)
    warmed: list[RequestRecord] = []
    if warm:
        load = _closed_loop(session, warm, cfg.streams, keep, warmup=True)
        warmed = await session.watched(load, "during warm-up")
    for k in range(cfg.measure.warmup_windows):
        items = make_prompts(
            w, w.measured(cfg.streams), f"{session.stream}/warmup-window{k}", True, session.run.length_tokenizer
        )
        warmed += await session.watched(
            _closed_loop(session, items, cfg.streams, keep, warmup=True), "during a warm-up window"
        )
    return warmed


async def _one_window(
    session: Session, items: list[Conversation], index: int, received: list[RequestRecord]
) -> tuple[list[RequestRecord], Counters, Counters, dict[str, float]]:
    """One measured window: counters, its requests (each joins ``received`` as it ends), the host's
    noise context, counters."""
    before = await session.counters("before a measured window")
    host = HostSample.now()
    started = time.time()  # the window's span (epoch s): evidence of arms taking turns
    with live.window(sum(len(c.turns) for c in items)) as on_done:

        def keep(record: RequestRecord) -> None:
            record.window = index
            received.append(record)
            on_done(record)

        records = await session.watched(_window_load(session, items, index, keep), "during a measured window")
    context = noise(host, HostSample.now()) | {"window_start": started, "window_end": time.time()}
    try:
        after = await session.counters("after a measured window")
    except ServerLost as exc:
        raise _cut_at_close(exc, index, records, received) from exc
    return records, before, after, context


def _cut_at_close(
    exc: ServerLost, index: int, records: list[RequestRecord], received: list[RequestRecord]
) -> ServerLost:
    """A window whose requests all ended but whose closing counter read was cut: its records are kept
    (the fillers join the measured ones ``received`` holds), and the point's error says why they
    have no metrics."""
    fillers = [r for r in records if r.filler]
    for record in fillers:
        record.window = index
    received.extend(fillers)
    cut = f"window {index + 1}'s closing counter read was cut: its {len(records)} records are kept without metrics"
    return type(exc)(f"{cut}; {exc}")


def _closed_loop(
    session: Session,
    items: list[Conversation],
    batch: int,
    keep: Callable[[RequestRecord], None] = lambda r: None,
    warmup: bool = False,
    fill: Sequence[Conversation] = (),
) -> Awaitable[list[RequestRecord]]:
    s = session
    return run_closed_loop(s.http, s.srv.base_url, s.shape, items, batch, s.engine.observe, keep, warmup, fill)


def _window_load(
    session: Session, items: list[Conversation], index: int, keep: Callable[[RequestRecord], None]
) -> Awaitable[list[RequestRecord]]:
    """A window's requests: at their arrival times (an open loop), or ``batch`` streams kept full to
    the window's end by fillers (specexp.load.client)."""
    cfg, s = session.cfg, session
    if cfg.load.kind == "rate":
        times = arrivals(cfg.load, len(items), (cfg.load.seed, s.run.repeat, index))
        cap = cfg.load.max_concurrency
        return run_open_loop(s.http, s.srv.base_url, s.shape, items, times, cap, s.engine.observe, keep)
    fill = make_prompts(cfg.workload, cfg.batch, f"{s.stream}/window{index}/fill", tokenizer=s.run.length_tokenizer)
    return _closed_loop(session, items, cfg.batch, keep, fill=fill)


def window_metrics(
    session: Session, index: int, records: list[RequestRecord], before: Counters, after: Counters
) -> dict[str, float]:
    """One window's metrics: requests, traffic, SLOs, the server's own latency, acceptance, categories."""
    engine = session.engine
    own = requests.measured(records)  # fillers count only in throughput and concurrency
    acceptance = acceptance_metrics(engine.acceptance(before, after, own))
    by_category = category_metrics(own, engine.request_counts)
    measured = requests.compute(records) | traffic.compute(records) | slo.compute(own, session.cfg.slo)
    measured |= server_metrics.latency(before, after) | server_metrics.bursts(records)
    measured |= server_metrics.gap(measured)
    if doubt := server_metrics.disagreement(measured):
        log.warning("window %d: %s", index + 1, doubt)
    return measured | acceptance | by_category


def fold(cfg: Config, result: PointResult, collected: Collected, launched: bool) -> None:
    """The windows' metrics into the point's result: each window's, their aggregate, and the tags
    that say where acceptance and token counts came from. ``launched``: specexp started the server."""
    windows = collected.windows
    result.windows = [m.metrics for m in windows]
    result.metrics |= aggregate(result.windows, cfg.measure)
    for warming in windows[: int(result.metrics["windows_warmup"])]:
        for record in warming.records:
            record.warmup = True  # still warming up: kept in records.jsonl, left out of the metrics
    if result.metrics.get("client_cpu", 0.0) >= CLIENT_CPU_WARNING:
        log.warning(
            "the load client used %.0f%% of a core at %s: it, not the server, may be setting the pace "
            "(docs/guides/confidence.md: Limits of the measurement)",
            100 * result.metrics["client_cpu"],
            load_label(cfg),
        )
    baseline = launched and not cfg.drafter.speculative
    if baseline:  # METRICS.md: 1.0 without speculation (known only for a server specexp launched itself)
        result.metrics.setdefault("accept_length", 1.0)
    result.tags["specexp.token_source"] = requests.token_source(collected.records)
    _tag_model_named(result, collected.records)
    measured = "spec_verify_steps" in result.metrics
    result.tags["specexp.acceptance"] = "measured" if measured else "none" if baseline else "unavailable"


def _tag_model_named(result: PointResult, records: list[RequestRecord]) -> None:
    """``specexp.model_mismatch`` (true or false) and, when true, ``specexp.streamed_model``: the
    streams named a model other than the one their requests asked for (the served name, /v1/models),
    so the server measured may not be the one meant; said once for the point."""
    named = [r for r in records if r.model]
    result.tags["specexp.model_mismatch"] = str(bool(named)).lower()
    if named:
        names = ", ".join(sorted({r.model for r in named if r.model}))
        result.tags["specexp.streamed_model"] = names
        log.warning(
            "%d of %d requests' streams named model %s, not the served name they asked for (/v1/models): "
            "the server measured may not be the one meant; the point is tagged specexp.model_mismatch=true",
            len(named),
            len(records),
            names,
        )
