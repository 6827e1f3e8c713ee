"""Beyond one process: a real ``mlflow server`` for a test, and ``python -m specexp`` runs that share it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from tests.conftest import FAST


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def outputs(tmp_path, shared_outputs) -> Path:
    """The test's own outputs/ (MLflow artifacts, server logs), the tiny model linked in."""
    from specexp.models.tiny import ensure_tiny

    ensure_tiny(shared_outputs)
    folder = tmp_path / "outputs"
    folder.mkdir()
    (folder / "models").symlink_to(shared_outputs / "models", target_is_directory=True)
    return folder


@pytest.fixture
def mlflow_server(tmp_path) -> Iterator[str]:
    """``mlflow server`` on a free port with a sqlite backend and served artifacts; its URL. Killed
    (its whole process group) at the end."""
    port = free_port()
    argv = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
        "--artifacts-destination", str(tmp_path / "server-artifacts"),
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    log = (tmp_path / "mlflow-server.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "mlflow-server.log").read_text()[-3000:]
            with suppress(OSError), urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    break
            assert time.monotonic() < deadline, "mlflow server never became healthy"
            time.sleep(0.5)
        yield url
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        log.close()


def specexp_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "specexp", *FAST, *args]


def specexp_env(outputs: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "SPECEXP_OUTPUTS": str(outputs), **extra}
