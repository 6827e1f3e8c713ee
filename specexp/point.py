"""One point: one server configuration at one batch size, measured and recorded.

config → server → load → records → PointResult → results.json → MLflow. Results reach the disk before
anything is sent anywhere; a failing point is recorded as failed (with the server log) and returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import re
import signal
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import aiohttp
from omegaconf import DictConfig, OmegaConf

from specexp import atomic, checks, live, secrets, server, signals, tracking
from specexp.config import Config, ConfigError, TrackingConfig
from specexp.console import fmt
from specexp.engines import adapter
from specexp.engines.base import Command, Engine
from specexp.load import progress
from specexp.load.arrivals import arrival_times
from specexp.load.client import run_closed_loop, run_open_loop
from specexp.load.host import CLIENT_CPU_WARNING, HostSample, noise
from specexp.load.prompts import check_workload, make_prompts
from specexp.load.requests import request_shape
from specexp.metrics import requests, slo, traffic
from specexp.metrics import server as server_metrics
from specexp.metrics.acceptance import acceptance_metrics
from specexp.metrics.categories import category_metrics
from specexp.metrics.windows import TREND_KEY, aggregate, more_windows
from specexp.records import RequestRecord
from specexp.result import PointResult

log = logging.getLogger("specexp")

PORT_PLACEHOLDER = 0  # the port in argv used for the server key and dry runs


class ServerPlan(NamedTuple):
    """What a config asks to serve: the adapter, the server command (port placeholder; None for an
    endpoint specexp does not launch) and the server key that decides reuse."""

    engine: Engine
    command: Command | None
    key: str


def describe(cfg: Config) -> ServerPlan:
    """The server a config asks for, without side effects."""
    engine = adapter(cfg)
    command = engine.command(cfg, PORT_PLACEHOLDER)
    return ServerPlan(engine, command, server.server_key(command, engine.endpoint(cfg, PORT_PLACEHOLDER)))


_checked: set[str] = set()  # server keys whose argv the engine's own parser accepted in this process


def preflight(cfg: Config) -> None:
    """Read the workload's dataset, and check the server's argv with the engine's own parser, once per
    server key per process; raises ConfigError before anything starts. Notes (settings the engine
    changes or ignores) are logged."""
    check_workload(cfg.workload)
    engine, command, key = describe(cfg)
    if key in _checked:  # an external endpoint (no command) is checked too: that it answers
        return
    checks.check_server_limits(cfg, engine, command)  # first: its refusal is then the only line
    for note in engine.preflight(cfg, command):
        log.warning(note)
    _checked.add(key)


SYNTHETIC = (
    "workload=%s sends random token ids: the acceptance measured on them does not represent real traffic "
    "(a drafter trained on language accepts far less of noise). Measure on a dataset: workload=humaneval, "
    "sharegpt, mtbench or hf, with workload.api=chat for a chat model."
)
_warned: set[str] = set()


def warn_synthetic(name: str) -> None:
    """Say once per process that speculation measured on random tokens is not what users get."""
    if name not in _warned:
        _warned.add(name)
        log.warning(SYNTHETIC, name)


def dry_run_text(cfg: Config) -> str:
    """A single run's dry run: the server it would start, as JSON; "" for a sweep's point, whose
    sweep prints one plan for all its points and servers (specexp.sweep.plan.dry_run_plan)."""
    if cfg.sweep_id:
        return ""
    _, command, key = describe(cfg)
    shown = {"server_key": key, "argv": command.argv, "env": command.env} if command else {"key": key}
    return json.dumps(secrets.scrub_data(shown), indent=2)


def show(cfg: Config, raw: DictConfig) -> PointResult:
    """A dry run: the server the point would start, printed; nothing is started or written."""
    if text := dry_run_text(cfg):
        print(text, flush=True)
    return PointResult.from_params("dry_run", flat_params(raw))


def flat_params(raw: DictConfig) -> dict[str, Any]:
    """The resolved config as dotted keys, secret values masked (ordinary settings never are)."""
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}{k}.")
        else:
            flat[prefix[:-1]] = node

    walk(OmegaConf.to_container(raw, resolve=True), "")
    return secrets.scrub_data(flat)


def ensure_models(cfg: Config) -> None:
    if "tiny" in (cfg.model.build, cfg.drafter.build):
        from specexp.models.tiny import ensure_tiny

        ensure_tiny(Path(cfg.outputs))
    if "tiny_trained" in (cfg.model.build, cfg.drafter.build):
        from specexp.models.tiny_trained import ensure_tiny_trained

        ensure_tiny_trained(Path(cfg.outputs))


def prepare(cfg: Config) -> None:
    """Before a job is checked or run: its secrets known (so nothing writes them), its models built."""
    secrets.remember_config(cfg)
    if not cfg.dry_run:
        ensure_models(cfg)


def check_files(cfg: Config) -> None:
    """The files a job names, readable before any server starts: its checkpoints (when specexp
    launches the server) and its dataset; ConfigError naming key, file and line."""
    if not cfg.dry_run and describe(cfg).command is not None:
        checks.check_model_files(cfg)
        checks.check_reference_memory(cfg)
    check_workload(cfg.workload)


class ServerLost(RuntimeError):
    """The server a point was using is gone or cannot be trusted: its records so far are partial."""


class ServerExited(ServerLost):
    """The launched server's process ended while a point was using it."""


class EngineStalled(ServerLost):
    """Requests waited on the server and nothing came back for engine.stall_s: it was killed."""


T = TypeVar("T")

# How long a refused or reset connection waits for the server's process to be seen ending, before
# it counts as the requests' own failure: the client can see the socket close first.
EXIT_GRACE_S = 3.0


async def watched(
    work: Awaitable[T], srv: server.Server, phase: str, stall_s: float | None = None, one_request: bool = False
) -> T:
    """``work``, unless the server process exits first (ServerExited, naming the exit code, ``phase``
    and the log's tail: what the records would otherwise hide as connection errors), or requests
    wait on it for ``stall_s`` with nothing back (EngineStalled; its process group is killed). A work
    that is not a load (a counters read: ``one_request``) is itself the one request waited on."""
    clock = progress.Progress()
    with progress.watching(clock):
        task = asyncio.ensure_future(_as_request(work, clock) if one_request else work)
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=0.25)
            if not srv.alive():
                break
            if stall_s is not None and clock.stalled(stall_s):
                error = stalled(srv, phase, stall_s, clock)
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise error
    except asyncio.CancelledError:  # Ctrl-C: the load ends here, before its HTTP session does
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    failed = task.done() and not task.cancelled() and task.exception() is not None
    if srv.alive() and (clock.connection_error or failed) and srv.process is not None:
        await asyncio.to_thread(_ended_within, srv.process, EXIT_GRACE_S)  # refused: has it died?
    if srv.alive():
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    code = srv.process.returncode if srv.process else None
    name = f" ({signal.Signals(-code).name})" if code is not None and code < 0 else ""
    tail = server.log_tail(srv.log_path) if srv.log_path else "(no log)"
    raise ServerExited(f"server exited with code {code}{name} {phase}; log tail:\n{tail}")


async def _as_request(work: Awaitable[T], clock: progress.Progress) -> T:
    with clock.request():
        return await work


def _ended_within(process: Any, seconds: float) -> None:
    with contextlib.suppress(Exception):
        process.wait(timeout=seconds)


def stalled(srv: server.Server, phase: str, stall_s: float, clock: progress.Progress) -> EngineStalled:
    """The stalled server killed (the next point gets a fresh one; its requests fail at once), and
    what was seen, in words."""
    state = server.process_state(srv.process.pid) if srv.process else "unknown (not launched by specexp)"
    waiting = f"{clock.in_flight} request{'s' * (clock.in_flight != 1)} in flight"
    tail = server.log_tail(srv.log_path) if srv.log_path else "(no log)"
    server.discard(srv)
    return EngineStalled(
        f"engine stalled: no token for {clock.idle_s():.0f} s with {waiting} {phase} (engine.stall_s="
        f"{stall_s:g}); process state: {state}; its process group was killed; log tail:\n{tail}"
    )


@dataclass
class Window:
    """One measured window: its records and its metrics (requests, traffic, SLOs, acceptance, noise context)."""

    records: list[RequestRecord]
    metrics: dict[str, float]


async def measure_windows(
    cfg: Config,
    engine: Engine,
    srv: server.Server,
    stream: str,
    windows: list[Window],
    received: list[RequestRecord],
    window: Callable[[], AbstractContextManager[None]] = nullcontext,
) -> None:
    """Warm-up (``workload.warmup`` requests, then ``measure.warmup_windows`` discarded windows), then
    consecutive windows until enough (specexp.metrics.windows), each inside
    ``window``: counters, the measured requests on fresh prompts (closed or open loop), counters, and
    the host's noise context. Windows are appended as they finish, and each record of the window in
    progress joins ``received`` as it finishes, so a point cut short by the server's death keeps
    everything it got."""
    w = cfg.workload
    base_url = srv.base_url
    stall_s = cfg.engine.stall_s
    shape = request_shape(w, srv.served_name or cfg.model.api_name, engine.request_fields(cfg))
    timeout = aiohttp.ClientTimeout(total=cfg.request_timeout_s)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(headers=engine.headers(cfg), timeout=timeout, connector=connector) as http:
        warm = make_prompts(w, w.warmups(cfg.streams), f"{stream}/warmup", warmup=True)
        warmed: list[RequestRecord] = []  # kept in records.jsonl (marked warmup) with the first window's
        if warm:
            load = run_closed_loop(http, base_url, shape, warm, cfg.streams, engine.observe, warmup=True)
            warmed = await watched(load, srv, "during warm-up", stall_s)
        for k in range(cfg.measure.warmup_windows):  # whole windows at the point's concurrency, discarded
            items = make_prompts(w, w.measured(cfg.streams), f"{stream}/warmup-window{k}", warmup=True)
            load = run_closed_loop(http, base_url, shape, items, cfg.streams, engine.observe, warmup=True)
            warmed += await watched(load, srv, "during a warm-up window", stall_s)
        received.extend(warmed)
        start = time.monotonic()
        while more_windows([m.metrics.get(TREND_KEY, 0.0) for m in windows], cfg.measure, time.monotonic() - start):
            index = len(windows)
            items = make_prompts(w, w.measured(cfg.streams), f"{stream}/window{index}")
            with window():
                before = await watched(
                    engine.read_counters(http, base_url), srv, "before a measured window", stall_s, True
                )
                host = HostSample.now()
                started = time.time()  # the window's span (epoch s): evidence of arms taking turns
                turns = sum(len(c.turns) for c in items)
                with live.window(turns) as on_done:

                    def keep(
                        record: RequestRecord, on_done: Callable[[RequestRecord], None] = on_done, index: int = index
                    ) -> None:
                        record.window = index
                        received.append(record)
                        on_done(record)

                    if cfg.load.kind == "rate":
                        seed = (cfg.load.seed, cfg.repeat, index)
                        arrivals = arrival_times(len(items), cfg.load.rate, cfg.load.burstiness, seed)
                        cap = cfg.load.max_concurrency
                        load = run_open_loop(http, base_url, shape, items, arrivals, cap, engine.observe, keep)
                    else:  # fillers keep the batch in flight to the window's end (specexp.load.client)
                        fill = make_prompts(w, cfg.batch, f"{stream}/window{index}/fill")
                        load = run_closed_loop(http, base_url, shape, items, cfg.batch, engine.observe, keep, fill=fill)
                    records = await watched(load, srv, "during a measured window", stall_s)
                context = noise(host, HostSample.now()) | {"window_start": started, "window_end": time.time()}
                after = await watched(
                    engine.read_counters(http, base_url), srv, "after a measured window", stall_s, True
                )
            for record in records:
                record.window = index
            received.clear()  # this window's records now live in its Window
            own = requests.measured(records)  # fillers count only in throughput and concurrency
            acceptance = acceptance_metrics(engine.acceptance(before, after, own))
            by_category = category_metrics(own, engine.request_counts)
            measured = requests.compute(records) | traffic.compute(records) | slo.compute(own, cfg.slo)
            measured |= server_metrics.latency(before, after) | server_metrics.bursts(records)
            measured |= server_metrics.gap(measured)
            if doubt := server_metrics.disagreement(measured):
                log.warning("window %d: %s", index + 1, doubt)
            windows.append(Window([*warmed, *records], measured | acceptance | by_category | context))
            warmed = []


async def fetch_server_info(engine: Engine, cfg: Config, base_url: str) -> dict[str, Any] | None:
    async with aiohttp.ClientSession(headers=engine.headers(cfg)) as http:
        try:
            return await engine.server_info(http, base_url)
        except aiohttp.ClientError as exc:
            return {"error": str(exc)}


def load_label(cfg: Config) -> str:
    """Where the point sits on its load axis: ``batch 4`` or ``rate 2/s``."""
    return f"batch {cfg.batch}" if cfg.load.kind == "closed" else f"rate {cfg.load.rate:g}/s"


def run_name(cfg: Config) -> str:
    """What the point's run is called: a sweep's name for it (the axes that vary), else its settings."""
    axis = load_label(cfg).replace(" ", "=")
    drafter = adapter(cfg).drafter_label(cfg)
    return cfg.run_name or f"{cfg.engine.name}/{cfg.model.name}: drafter={drafter} {axis}"


@contextmanager
def measured_window(cfg: Config, result: PointResult, span: list[int]) -> Iterator[None]:
    """One measured window: the point's run is opened as the first one starts (so MLflow's monitor
    samples the system into it); ``span`` holds the first window's start and the last one's end."""
    start = tracking.now_ms()
    if cfg.tracking.enabled and result.run_id is None:
        try:
            point_id = result.tags[tracking.POINT_ID]
            result.run_id = tracking.open_point(
                cfg.tracking, Path(cfg.outputs), run_name(cfg), cfg.sweep_id, start, point_id
            )
        except Exception as exc:  # the point goes on; its run is created when it ends
            log.error("could not open the point's MLflow run (%s)", tracking.store_message(exc))
    span[:1] = span[:1] or [start]
    try:
        with tracking.system_metrics(cfg.tracking, result.run_id):
            yield
    finally:
        span[1:] = [tracking.now_ms()]


@contextmanager
def in_turn(
    turn: Callable[[], AbstractContextManager[object]], window: Callable[[], AbstractContextManager[None]]
) -> Iterator[None]:
    """A measured window once it is this point's turn."""
    with turn(), window():
        yield


def run(
    cfg: Config,
    raw: DictConfig,
    job_dir: Path,
    job_num: int,
    turn: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> PointResult:
    """Measure one point and record it; never raises for a failed point (only for interrupts, and
    for a job folder that already holds results, which nothing may write over). ``turn`` is entered
    around each measured window (arms taking turns, specexp.sweep.turns)."""
    if (job_dir / RESULTS).exists():
        raise FileExistsError(f"{job_dir} already holds the results of another point; nothing is written over them")
    job_dir.mkdir(parents=True, exist_ok=True)
    secrets.remember_config(cfg)
    engine, key_command, key = describe(cfg)
    result = PointResult(
        status="ok",
        engine=cfg.engine.name,
        model=cfg.model.name,
        drafter=engine.drafter_label(cfg),
        batch=cfg.batch,
        load=cfg.load.kind,
        rate=cfg.load.rate,
        params=engine.recorded_params(cfg, flat_params(raw)),
        job_dir=str(job_dir),
    )
    result.tags = {
        tracking.POINT_ID: uuid.uuid4().hex,
        "mlflow.runName": run_name(cfg),
        "specexp.sweep_id": cfg.sweep_id or "",
        "specexp.server_key": key,
        "specexp.git_sha": tracking.git_sha(),
        "specexp.engine": cfg.engine.name,
        "specexp.drafter": engine.drafter_label(cfg),
        "specexp.workload_synthetic": str(cfg.workload.synthetic).lower(),
    }
    if "CUDA_VISIBLE_DEVICES" in os.environ:  # the GPUs its server was given (a group's slice of a node)
        result.tags["specexp.cuda_visible_devices"] = os.environ["CUDA_VISIBLE_DEVICES"]
    if cfg.workload.synthetic and cfg.drafter.speculative:
        warn_synthetic(cfg.workload.name)
    config = OmegaConf.to_container(raw, resolve=True)
    server_log_start = 0
    launch = server.launch_id()
    log_path = Path(cfg.outputs).resolve() / "servers" / f"{time.strftime('%Y%m%d-%H%M%S')}-{key}-{launch}.log"
    windows: list[Window] = []
    received: list[RequestRecord] = []  # records of the window in progress
    records: list[RequestRecord] = []
    span: list[int] = []  # the measured windows, ms since the epoch: the run's start and end
    live.point_started(job_num + 1, run_name(cfg), cfg.measure.windows)
    try:
        atomic.write_text(job_dir / "config.yaml", OmegaConf.to_yaml(secrets.scrub_data(config)))
        ensure_models(cfg)
        preflight(cfg)
        port = cfg.engine.port or server.free_port(cfg.engine.host)
        base_url = engine.endpoint(cfg, port)
        identity = None
        if key_command is not None:  # served under a name carrying the launch id, proven at readiness
            identity = server.Identity(base_url + "/v1/models", f"{cfg.model.api_name}@{launch}")
            cfg = replace(cfg, model=replace(cfg.model, served_name=identity.served_name))
        with live.server_launch(server_label(cfg)) as ready:
            srv, reused = server.acquire(
                key if cfg.repeats == 1 else f"{key}/launch{cfg.repeat}",  # each round of repeats: a fresh launch
                engine.command(cfg, port),
                base_url,
                base_url + engine.ready_path,
                log_path,
                cfg.engine.startup_timeout_s,
                engine.headers(cfg),
                identity,
                cfg.engine.stall_s,
            )
            ready(srv.startup_s, reused)
        if reused:
            log_path, server_log_start = srv.log_path or log_path, srv.log_size()
        else:
            result.metrics["server_startup_s"] = srv.startup_s
            if key_command is not None and cfg.load.kind == "rate":  # no batch says how it was sized
                log.info("server limit on running requests: %d (%s)", cfg.capacity, cfg.capacity_source)
            _write_json(job_dir / "server_info.json", asyncio.run(fetch_server_info(engine, cfg, srv.base_url)))
        shown = srv.command or key_command
        if shown:
            _write_json(job_dir / "server.json", {"argv": shown.argv, "env": shown.env})
        if srv.version is None:  # asked once per server: it may start the engine's interpreter
            srv.version = engine.version(cfg) or "unknown"
        result.tags |= {
            "specexp.server_reused": str(reused).lower(),
            "specexp.engine_version": srv.version,
            "specexp.host_cpus": str(os.cpu_count()),
            **engine.tags(cfg),
        }
        # unique per sweep and job (each launch of a repeated point is a job); a single run uses its
        # folder's name (new each run)
        stream = f"{cfg.sweep_id or job_dir.name}/{job_num}"
        window = functools.partial(in_turn, turn, functools.partial(measured_window, cfg, result, span))
        try:
            asyncio.run(measure_windows(cfg, engine, srv, stream, windows, received, window))
        finally:  # the windows measured, then what the window in progress received
            records = [record for m in windows for record in m.records] + sorted(received, key=lambda r: r.index)
        result.windows = [m.metrics for m in windows]
        result.metrics |= aggregate(result.windows, cfg.measure)
        for warming in windows[: int(result.metrics["windows_warmup"])]:
            for record in warming.records:
                record.warmup = True  # still warming up: kept in records.jsonl, left out of the metrics
        if result.metrics.get("client_cpu", 0.0) >= CLIENT_CPU_WARNING:
            log.warning(
                "the load client used %.0f%% of a core at %s: it, not the server, may be setting the pace "
                "(README: Limits of the measurement)",
                100 * result.metrics["client_cpu"],
                load_label(cfg),
            )
        if key_command is not None and not cfg.drafter.speculative:
            # METRICS.md: 1.0 without speculation (known only for a server specexp launched itself)
            result.metrics.setdefault("accept_length", 1.0)
        result.tags["specexp.token_source"] = requests.token_source(records)
        result.tags["specexp.acceptance"] = (
            "measured"
            if "spec_verify_steps" in result.metrics
            else "none"
            if key_command is not None and not cfg.drafter.speculative
            else "unavailable"
        )
        if result.metrics.get("requests_ok", 0) == 0:
            first = records[0].error if records else "-"
            raise RuntimeError(
                f"every measured request failed; first error: {first}{server_cause(log_path, server_log_start)}"
            )
    except KeyboardInterrupt:
        result.status, result.error = "interrupted", "interrupted (SIGINT)"
        raise
    except SystemExit as exc:
        result.status, result.error = "interrupted", f"interrupted (exit {exc.code})"
        raise
    except ConfigError as exc:  # the engine's own parser refused the argv: nothing was started
        log.error("%s", exc)
        result.status, result.error = "failed", f"ConfigError: {exc}"
    except ServerLost as exc:  # the evidence: what was received, the exit code or state, the log's tail
        log.error("%s", exc)
        kept = f"{len(records)} records kept, marked partial" if records else "no records received"
        result.status, result.error = "failed", f"{exc} ({kept})"
        if records:
            result.tags["specexp.records"] = "partial"
        if windows:  # the windows that finished keep their metrics
            result.windows = [m.metrics for m in windows]
            result.metrics |= aggregate(result.windows, cfg.measure)
    except Exception as exc:  # a failing point is recorded and the sweep goes on
        if atomic.is_write_error(exc):  # said in one line: the disk, not specexp, needs fixing
            log.error("%s: the point is recorded as failed", atomic.reason(exc))
            result.status, result.error = "failed", atomic.reason(exc)
        else:
            log.exception("point failed")
            result.status, result.error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        result.tags["specexp.status"] = result.status
        with signals.deferred():  # a second Ctrl-C does not cut the point's record short
            _save(result, job_dir, log_path, server_log_start, records)
            _track(cfg, result, job_dir, span[1] if len(span) > 1 else None)
        live.point_ended(result.status, live_summary(result))
    return result


def server_label(cfg: Config) -> str:
    """The server a point uses, in words for the live display."""
    return f"{cfg.engine.name} serving {cfg.model.name}, drafter={cfg.drafter.name}"


def live_summary(result: PointResult) -> str:
    """A point's headline figures (or its error's first line) for the line that says it ended."""
    if result.status != "ok":
        return (result.error or result.status).splitlines()[0][:200]
    m = result.metrics
    shown = fmt(m.get("output_throughput", 0.0), 1, m.get("output_throughput_ci95")) + " tok/s"
    if "accept_length" in m:
        shown += f" · accept length {m['accept_length']:.2f}"
    return shown + f" · {int(m.get('windows', 0))} windows"


RESULTS = "results.json"
ERROR_TAG = "specexp.error"  # why a point failed, on its run
ARTIFACTS = ("config.yaml", "server.json", "server_info.json", "server.log", "records.jsonl", RESULTS)


def _save(result: PointResult, job_dir: Path, log_path: Path, log_start: int, records: list[RequestRecord]) -> None:
    """The point's files, each whole or not at all; when one cannot be written (a full disk, an I/O
    error, a permission) the point fails naming it, and results.json says so if it still fits: no
    point is ok with its data missing."""
    try:
        _save_server_log(log_path, log_start, job_dir)
        _write_records(job_dir / "records.jsonl", records)
        _write_json(job_dir / RESULTS, result.to_json())
    except OSError as exc:
        problem = atomic.reason(exc)
        log.error("%s: the point is recorded as failed", problem)
        result.status, result.error = (
            "failed",
            f"{problem}" + (f"; before that: {result.error}" if result.error else ""),
        )
        result.tags["specexp.status"] = result.status
        with contextlib.suppress(OSError):
            _write_json(job_dir / RESULTS, result.to_json())


def _write_json(path: Path, data: Any) -> None:
    atomic.write_text(path, json.dumps(secrets.scrub_data(data), indent=2, default=str))


def _write_records(path: Path, records: list[RequestRecord]) -> None:
    with atomic.replacing(path) as tmp, tmp.open("w") as f:
        for r in records:
            f.write(json.dumps(r.to_json()) + "\n")


# An exception's last line (``RuntimeError: ... not enough memory``), not an access log's "500 Internal Server Error".
CAUSE = re.compile(r"^\s*[\w.]*(Error|Exception)(\s*\[[^]]*\])?:\s|\bout of memory\b", re.IGNORECASE)


def server_cause(log_path: Path, start: int) -> str:
    """The last line of this point's slice of the server log that names an error (the allocation
    that failed, the exception), for the point's reason: the client only sees "engine failure"."""
    try:
        with log_path.open("rb") as f:
            f.seek(start)
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    found = [line.strip() for line in lines if CAUSE.search(line)]
    return f"; the server's log says: {secrets.scrub(found[-1])[:1000]}" if found else ""


def _save_server_log(log_path: Path, start: int, job_dir: Path) -> None:
    """This point's slice of the server log (from launch, or from where the last point left off)."""
    if not log_path.exists():
        return
    with log_path.open("rb") as f:
        f.seek(start)
        text = f.read().decode(errors="surrogateescape")
    atomic.write_text(job_dir / "server.log", secrets.scrub(text), errors="surrogateescape")


def _track(cfg: Config, result: PointResult, job_dir: Path, end_time: int | None) -> None:
    if not cfg.tracking.enabled:
        return
    try:
        upload(cfg.tracking, Path(cfg.outputs), result, job_dir, end_time)
    except Exception as exc:  # the results are on disk: specexp.sync uploads them later
        log.error("MLflow logging failed (%s); results kept in %s", tracking.store_message(exc), job_dir)


def upload(
    tracking_cfg: TrackingConfig, outputs: Path, result: PointResult, job_dir: Path, end_time: int | None = None
) -> str:
    """Send a point on disk to MLflow (its run opened at the window's start, or a new one; an upload
    that completed before is kept as it is) and note the run's id in results.json; raises when
    tracking fails."""
    result.run_id = tracking.log_point(
        tracking_cfg,
        outputs,
        run_name=result.tags.get("mlflow.runName", job_dir.name),
        metrics=result.metrics,
        params=result.params,
        tags=result.tags | ({ERROR_TAG: result.error[:5000]} if result.error else {}),
        artifacts=[job_dir / n for n in ARTIFACTS],
        status={"ok": "FINISHED", "failed": "FAILED"}.get(result.status, "KILLED"),
        sweep_id=result.tags.get("specexp.sweep_id") or None,
        run_id=result.run_id,
        end_time=end_time,
    )
    with contextlib.suppress(OSError):  # the run is found by the point's id all the same
        _write_json(job_dir / RESULTS, result.to_json())
    return result.run_id


def upload_saved(tracking_cfg: TrackingConfig, outputs: Path, result: PointResult, job_dir: Path) -> PointResult:
    """A point read back from ``job_dir``, its upload completed unless it was complete (an interrupt
    may have cut it short after results.json was written); one from before point ids is left as it is."""
    if result.status != "dry_run" and not (result.run_id and tracking.POINT_ID not in result.tags):
        upload(tracking_cfg, outputs, result, job_dir)
    return result
