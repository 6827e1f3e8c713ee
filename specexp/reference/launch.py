"""Start a reference server for a while and stop it (tests, benchmarks), on specexp.server's
launch, readiness and teardown primitives; specexp's own runs go through the torch adapter."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from specexp.engines.base import Command
from specexp.server import free_port, spawn, terminate, wait_ready


@contextmanager
def serve(args: list[str], log: Path, deadline_s: float = 120.0, cwd: Path | None = None) -> Iterator[str]:
    """Run ``python -m specexp.reference --host 127.0.0.1 --port <free> *args``; yield its base URL.

    The server gets its own process group, killed on exit however the block ends; a server that
    exits or is not healthy within ``deadline_s`` raises ServerStartError with its log's tail.
    """
    port = free_port("127.0.0.1")
    argv = [sys.executable, "-m", "specexp.reference", "--host", "127.0.0.1", "--port", str(port), *args]
    log.unlink(missing_ok=True)
    proc = spawn(Command(argv), log, cwd)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url + "/health", deadline_s, proc, log)
        yield url
    finally:
        terminate(proc)
