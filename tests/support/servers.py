"""Real processes a test talks to over a socket: a free port, polling until something holds, and an
``mlflow server`` started and stopped with its whole process group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url: str) -> bool:
    """Whether ``url`` answers 200 within two seconds."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def wait_for(check: Callable[[], object], timeout: float, what: str, proc: subprocess.Popen | None = None) -> object:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` (and a dead ``proc``)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"process exited ({proc.returncode}) before {what}:\n{out[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def stop_group(proc: subprocess.Popen) -> None:
    """Kill a process started with start_new_session and everything in its group."""
    if proc.poll() is None:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@contextmanager
def mlflow_server(root: Path, port: int, store: Path | None = None) -> Iterator[str]:
    """A real ``mlflow server`` on ``port`` over ``store`` (default ``<root>/server.db``), artifacts
    proxied to ``<root>/served``, its output in ``<root>/mlflow-server.log``; its URL until the block ends."""
    argv = [
        sys.executable, "-m", "mlflow", "server",
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
        "--backend-store-uri", f"sqlite:///{store or root / 'server.db'}",
        "--artifacts-destination", str(root / "served"),
    ]  # fmt: skip
    log_path = root / "mlflow-server.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(argv, cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            try:
                wait_for(lambda: healthy(url + "/health"), 120, "the MLflow server", proc)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{log_path.read_text(errors='replace')[-3000:]}") from None
            yield url
        finally:
            stop_group(proc)
