"""Engine server lifecycle: launch, identity and readiness, log capture, reuse across a sweep's jobs,
teardown.

One server runs at a time per specexp process (while a sweep's arms take turns, one per arm).
Later jobs with the same server key reuse it; a new key, an exception, SIGINT, SIGTERM or
interpreter exit tears the whole process group down, so no engine process outlives specexp. A
launched server is measured only once it has proven to be the one launched: its port was free
before the launch, its process still runs, and it serves the model under a name that carries this
launch's id (``/v1/models``), so someone else's server answering on the same port is never
mistaken for it.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from specexp import redaction, signals
from specexp.engines.base import Command
from specexp.processes import group_activity, log_tail, process_state, spawn, terminate


class ServerStartError(RuntimeError):
    """The server died, never became ready, or is not the one launched; carries the tail of its log."""


def server_key(command: Command | None, endpoint: str) -> str:
    """Hash of everything that changes the server process: its argv (port aside) and environment."""
    payload = json.dumps({"argv": command.argv, "env": command.env} if command else {"endpoint": endpoint})
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def launch_id() -> str:
    """A new launch's id: part of the name the server serves under and of its log's name."""
    return uuid.uuid4().hex[:8]


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on ``host:port`` (False when this machine cannot tell, e.g.
    for a host that is not one of its addresses)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is free to a server
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def port_in_use_message(host: str, port: int) -> tuple[str, str]:
    """The problem and the fix, for ConfigError("engine.port", ...) and ServerStartError alike."""
    return (
        f"port {port} on {host} is already in use (another server?)",
        f"stop whatever listens on port {port}, pick another engine.port, or leave engine.port unset "
        "(null) so specexp picks a free port",
    )


@dataclass(frozen=True)
class Identity:
    """How a launched server proves it is the one specexp started: it lists ``served_name``, which
    carries the launch's id, at ``models_url``."""

    models_url: str
    served_name: str


@dataclass
class Server:
    key: str
    base_url: str
    process: subprocess.Popen[bytes] | None
    log_path: Path | None
    startup_s: float
    command: Command | None
    version: str | None = None  # the engine's version, asked once per server
    served_name: str | None = None  # the model name requests must send (None: the config's)

    def alive(self) -> bool:
        return self.process is None or self.process.poll() is None

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path and self.log_path.exists() else 0


def wait_ready(
    url: str,
    deadline_s: float,
    process: subprocess.Popen[bytes] | None,
    log: Path | None,
    headers: dict[str, str] | None = None,
    identity: Identity | None = None,
    stall_s: float | None = None,
) -> None:
    """Poll ``url`` until it answers 200 and, for a launched server, until it proves its ``identity``;
    fail at once when the process exits or a server that is not the launched one answers, and after
    ``stall_s`` of a launched server doing nothing (stopped, or no CPU used and no log written)."""
    end = time.monotonic() + deadline_s
    still = _Stillness(process, log)
    while True:
        if process is not None and process.poll() is not None:
            raise ServerStartError(
                f"server exited with code {process.returncode} before it was ready; log tail:\n"
                + (log_tail(log) if log else "")
            )
        if _answers(url, headers) and (identity is None or _proven(identity, headers, log)):
            if process is not None and process.poll() is not None:
                continue  # it answered and died: reported above
            return
        if time.monotonic() > end:
            raise ServerStartError(
                f"server not ready at {url} after {deadline_s:.0f}s; log tail:\n" + (log_tail(log) if log else "")
            )
        if stall_s is not None and process is not None and (why := still.stalled(stall_s)):
            raise ServerStartError(
                f"engine stalled while starting: {why} for {stall_s:g} s (engine.stall_s), process state: "
                f"{process_state(process.pid)}; log tail:\n" + (log_tail(log) if log else "")
            )
        time.sleep(0.25)


class _Stillness:
    """How long a starting server's process group has done nothing: all stopped, or no CPU used and
    not a byte of log written since the last change."""

    def __init__(self, process: subprocess.Popen[bytes] | None, log: Path | None) -> None:
        self.process, self.log = process, log
        self.seen: tuple[bool, int, int] | None = None
        self.since = time.monotonic()

    def stalled(self, stall_s: float) -> str | None:
        assert self.process is not None
        stopped, ticks = group_activity(self.process.pid)
        size = self.log.stat().st_size if self.log and self.log.exists() else 0
        now = (stopped, ticks, size)
        if now != self.seen:
            self.seen, self.since = now, time.monotonic()
        if time.monotonic() - self.since < stall_s:
            return None
        return "every process stopped" if stopped else "no CPU used and no log written"


def _answers(url: str, headers: dict[str, str] | None) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def _proven(identity: Identity, headers: dict[str, str] | None, log: Path | None) -> bool:
    """True when the answering server lists the launch's name; ServerStartError when it lists others."""
    try:
        req = urllib.request.Request(identity.models_url, headers=headers or {})
        with urllib.request.urlopen(req, timeout=5) as resp:
            served = [m.get("id") for m in json.load(resp).get("data", [])]
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError, AttributeError):
        return False  # not up yet
    if identity.served_name in served:
        return True
    port = urllib.parse.urlsplit(identity.models_url).port
    raise ServerStartError(
        f"{identity.models_url} answers, but not the server specexp launched: it serves {served}, not "
        f"{identity.served_name!r}, so another process is listening on port {port}. Fix: stop it, or leave "
        "engine.port unset (null) so specexp picks a free port; log tail:\n" + (log_tail(log) if log else "")
    )


def launch(
    command: Command,
    key: str,
    base_url: str,
    ready_url: str,
    log_path: Path,
    deadline_s: float,
    identity: Identity | None = None,
    stall_s: float | None = None,
) -> Server:
    """Start ``command`` and wait until it is ready and proven to be the server answering."""
    split = urllib.parse.urlsplit(base_url)
    if split.hostname and split.port and port_in_use(split.hostname, split.port):
        problem, fix = port_in_use_message(split.hostname, split.port)
        raise ServerStartError(f"{problem}. Fix: {fix}")
    t0 = time.monotonic()
    process = spawn(command, log_path)
    server = Server(key, base_url, process, log_path, 0.0, command)
    server.served_name = identity.served_name if identity else None
    _pool.add(server)  # registered before readiness so an interrupt still tears it down
    try:
        wait_ready(ready_url, deadline_s, process, log_path, identity=identity, stall_s=stall_s)
    except BaseException:
        _pool.drop(server)
        raise
    server.startup_s = time.monotonic() - t0
    return server


class _Pool:
    """The servers this process holds: one, reused while the key stays the same; up to ``capacity``
    while a sweep's arms take turns (``holding``), the least recently used stopped to make room."""

    def __init__(self) -> None:
        self.servers: dict[str, Server] = {}  # least recently used first
        self.capacity = 1
        self._hooked = False
        self._lock = threading.RLock()  # arms' threads use it; an interrupt stops it from the main thread

    def get(self, key: str) -> Server | None:
        """The running server for ``key``, or None after making room for its launch."""
        with self._lock:
            server = self.servers.pop(key, None)
            if server is not None and server.alive():
                self.servers[key] = server
                return server
            if server is not None:
                self._stop(server)
            while len(self.servers) >= self.capacity:
                self._stop_oldest()
        self._hook()
        return None

    def add(self, server: Server) -> None:
        with self._lock:
            self.servers[server.key] = server

    def drop(self, server: Server) -> None:
        """Stop one server (a launch that failed), leaving the others up."""
        with self._lock:
            self.servers.pop(server.key, None)
            self._stop(server)

    def stop(self) -> None:
        with self._lock:
            while self.servers:
                self._stop_oldest()

    def _stop_oldest(self) -> None:
        self._stop(self.servers.pop(next(iter(self.servers))))

    @staticmethod
    def _stop(server: Server, grace_s: float = 10.0) -> None:
        """Stop a server taken out of the pool. Nothing else would stop it or scrub its log after
        this, so a Ctrl-C meanwhile is held until both are done."""
        if server.process is None:
            return
        with signals.deferred(reraise=sys.exc_info()[1] is None):
            terminate(server.process, grace_s)
            if server.log_path is not None:
                redaction.scrub_file(server.log_path)

    def _hook(self) -> None:
        if self._hooked:
            return
        self._hooked = True
        atexit.register(self.stop)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(ValueError):  # not the main thread: the launcher owns signals
                signal.signal(sig, _raise_exit)


def _raise_exit(signum: int, _frame: object) -> None:
    """SIGTERM/SIGHUP unwind like SIGINT does, so finally-blocks and atexit tear the server down."""
    raise SystemExit(128 + signum)


_pool = _Pool()


def acquire(
    key: str,
    command: Command | None,
    base_url: str,
    ready_url: str,
    log_path: Path,
    deadline_s: float,
    headers: dict[str, str] | None = None,
    identity: Identity | None = None,
    stall_s: float | None = None,
) -> tuple[Server, bool]:
    """The server for ``key``: the running one (reused=True) or a fresh launch."""
    server = _pool.get(key)
    if server is not None:
        return server, True
    if command is None:  # an external endpoint: nothing to launch, just make sure it answers
        t0 = time.monotonic()
        wait_ready(ready_url, deadline_s, None, None, headers)
        server = Server(key, base_url, None, None, time.monotonic() - t0, None)
        _pool.add(server)
        return server, False
    return launch(command, key, base_url, ready_url, log_path, deadline_s, identity, stall_s), False


def stop() -> None:
    _pool.stop()


def discard(server: Server) -> None:
    """Kill a server that cannot be trusted any more (it hung), its whole process group at once, so
    the next point that asks for its key gets a fresh launch."""
    with _pool._lock:
        if _pool.servers.get(server.key) is server:
            del _pool.servers[server.key]
    _Pool._stop(server, grace_s=0)


@contextlib.contextmanager
def holding(capacity: int) -> Iterator[None]:
    """Keep up to ``capacity`` servers up at once inside (a sweep's arms taking turns); every one
    is stopped on the way out. Called in the main thread: the teardown's signal handlers can only be
    installed there, and the arms' threads launch the servers."""
    if _kept_up:  # inside keep_up: the servers outlive this block
        yield
        return
    _pool._hook()
    _pool.capacity = max(1, capacity)
    try:
        yield
    finally:
        _pool.stop()
        _pool.capacity = 1


_kept_up = False  # inside keep_up


@contextlib.contextmanager
def keep_up(capacity: int) -> Iterator[None]:
    """Keep up to ``capacity`` servers up across every ``holding`` block inside (the launches of a
    search, run one after another in this process): such a block then leaves its servers for the next
    one with the same server key instead of stopping them; all are stopped on the way out."""
    global _kept_up
    with holding(capacity):
        _kept_up = True
        try:
            yield
        finally:
            _kept_up = False


@contextlib.contextmanager
def serve_reference(args: list[str], log: Path, deadline_s: float = 120.0, cwd: Path | None = None) -> Iterator[str]:
    """Run the reference engine (``python -m specexp.reference --host 127.0.0.1 --port <free> *args``)
    for a while and yield its base URL: for tests and benchmarks; specexp's runs go through ``acquire``.

    The server gets its own process group, killed on exit however the block ends; a server that
    exits or is not healthy within ``deadline_s`` raises ServerStartError with its log's tail.
    """
    port = free_port("127.0.0.1")
    argv = [sys.executable, "-m", "specexp.reference", "--host", "127.0.0.1", "--port", str(port), *args]
    log.unlink(missing_ok=True)
    process = spawn(Command(argv), log, cwd)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url + "/health", deadline_s, process, log)
        yield url
    finally:
        terminate(process)
