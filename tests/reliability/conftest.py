"""A private specexp workspace per test: its own outputs/ (run and sweep folders, mlflow.db, server
logs) in a temporary folder, the tiny model linked in from the shared build, and helpers to start
specexp or a foreign reference server as real processes (an MLflow server: tests.support.servers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest
from mlflow import MlflowClient

from specexp.models.tiny import ensure_tiny
from tests.conftest import FAST, engine_processes, sigint_as_in_a_terminal
from tests.support import inprocess, store
from tests.support.servers import healthy, stop_group, wait_for


@dataclass
class Workspace:
    """``python -m specexp`` runs in ``root`` with SPECEXP_OUTPUTS=``outputs``: every default folder
    and store (runs/, multirun/, servers/, mlflow.db) lands in the test's own temporary folder."""

    root: Path
    outputs: Path

    @property
    def uri(self) -> str:
        return f"sqlite:///{self.outputs / 'mlflow.db'}"

    @property
    def marker(self) -> str:
        """A string in the argv of every engine this workspace starts (its model path)."""
        return str(self.outputs / "models")

    def argv(self, *args: str, fast: bool = True) -> list[str]:
        return [sys.executable, "-m", "specexp", *(FAST if fast else []), *args]

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "SPECEXP_OUTPUTS": str(self.outputs), **extra}

    def run(self, *args: str, timeout: float = 400, fast: bool = True, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.argv(*args, fast=fast),
            cwd=self.root,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, *args: str, fast: bool = True, **env: str) -> subprocess.Popen:
        """specexp in the background, SIGINT-able even when pytest itself ignores SIGINT (a shell
        starts background jobs so, and the children inherit it)."""
        return subprocess.Popen(
            self.argv(*args, fast=fast),
            cwd=self.root,
            env=self.env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=sigint_as_in_a_terminal,
        )

    @contextmanager
    def started(self, *args: str, fast: bool = True, **env: str) -> Iterator[subprocess.Popen]:
        """``popen`` for the block's length: a specexp still running when it ends (a failed wait) is killed."""
        proc = self.popen(*args, fast=fast, **env)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def main(self, *args: str, fast: bool = True) -> inprocess.Outcome:
        """``run`` without the process (tests.support.inprocess): for refusals and dry runs, which
        start nothing; what it printed is in ``stdout``/``stderr`` as ``run``'s."""
        return inprocess.main([*(FAST if fast else []), *args], self.root, {"SPECEXP_OUTPUTS": str(self.outputs)})

    def module(self, module: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", module, *args],
            cwd=self.root,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def mlflow(self, uri: str | None = None) -> MlflowClient:
        return MlflowClient(tracking_uri=uri or self.uri)

    def runs(self, uri: str | None = None) -> list:
        if self.logged(uri) == 0:
            return []
        client = self.mlflow(uri)
        exp = client.get_experiment_by_name("specexp")
        return client.search_runs([exp.experiment_id]) if exp else []

    def logged(self, uri: str | None = None) -> int | None:
        """How many runs a sqlite store holds, read without MLflow (which would create a missing
        store to answer); None for a store behind a server."""
        uri = uri or self.uri
        return store.logged_runs(Path(uri.removeprefix("sqlite:///"))) if uri.startswith("sqlite:///") else None

    def sweeps(self) -> list[Path]:
        root = self.outputs / "multirun"
        return sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []

    def engines(self) -> list[int]:
        return engine_processes(self.marker)

    def no_engine_left(self, timeout: float = 20) -> None:
        """Every engine this workspace started is gone (parent-death signals take a moment)."""
        end = time.monotonic() + timeout
        while self.engines() and time.monotonic() < end:
            time.sleep(0.2)
        assert self.engines() == [], "an engine process outlived specexp"


def workspace(root: Path, shared_outputs: Path) -> Workspace:
    """A workspace in ``root`` whose outputs/ sees the shared tiny model."""
    ensure_tiny(shared_outputs)
    outputs = root / "outputs"
    outputs.mkdir()
    (outputs / "models").symlink_to(shared_outputs / "models", target_is_directory=True)
    return Workspace(root, outputs)


def no_engines_left_behind(workspace: Workspace) -> None:
    """A failed test must not leave servers behind."""
    for pid in workspace.engines():
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def ws(tmp_path: Path, shared_outputs: Path, mlflow_template: Path) -> Iterator[Workspace]:
    """A workspace for real specexp processes; its store (outputs/mlflow.db) is a copy of the
    session's empty one."""
    made = workspace(tmp_path, shared_outputs)
    store.place(mlflow_template, made.outputs / "mlflow.db")
    yield made
    no_engines_left_behind(made)


@pytest.fixture
def idle_ws(tmp_path: Path, shared_outputs: Path) -> Iterator[Workspace]:
    """A workspace for runs that must start nothing (refusals, dry runs; ``Workspace.main``): no
    store in it, so one made is seen; not a live fixture, so its tests are in the quick tier."""
    made = workspace(tmp_path, shared_outputs)
    yield made
    no_engines_left_behind(made)


def reference_argv(ws: Workspace, port: int, served_name: str = "tiny") -> list[str]:
    """A reference engine serving the tiny target without a drafter (someone else's server)."""
    return [
        sys.executable,
        "-m",
        "specexp.reference",
        "--model",
        str(ws.outputs / "models" / "tiny" / "target"),
        "--served-model-name",
        served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-running-requests",
        "8",
        "--num-continuous-decode-steps",
        "1",
        "--threads",
        "1",
    ]


@contextmanager
def foreign_server(ws: Workspace, port: int, served_name: str = "tiny") -> Iterator[str]:
    """A reference engine specexp did not start, listening on ``port`` until the block ends."""
    log = (ws.root / f"foreign-{port}.log").open("wb")
    proc = subprocess.Popen(
        reference_argv(ws, port, served_name), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: healthy(url + "/health"), 120, f"the foreign server on port {port}", proc)
        yield url
    finally:
        stop_group(proc)
        log.close()
