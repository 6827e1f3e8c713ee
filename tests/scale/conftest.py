"""Beyond one process: a real ``mlflow server`` for a test, and ``python -m specexp`` runs that share it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FAST
from tests.support import servers, store


@pytest.fixture
def outputs(tmp_path, shared_outputs, mlflow_template) -> Path:
    """The test's own outputs/ (MLflow artifacts, server logs), the tiny model linked in; the store
    the tests log to (<tmp_path>/mlflow.db) starts as a copy of the session's empty one."""
    from specexp.models.tiny import ensure_tiny

    ensure_tiny(shared_outputs)
    folder = tmp_path / "outputs"
    folder.mkdir()
    (folder / "models").symlink_to(shared_outputs / "models", target_is_directory=True)
    store.place(mlflow_template, tmp_path / "mlflow.db")
    return folder


@pytest.fixture
def mlflow_server(tmp_path) -> Iterator[str]:
    """``mlflow server`` on a free port with a sqlite backend and served artifacts; its URL. Killed
    (its whole process group) at the end."""
    with servers.mlflow_server(tmp_path, servers.free_port()) as url:
        yield url


def specexp_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "specexp", *FAST, *args]


def specexp_env(outputs: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "SPECEXP_OUTPUTS": str(outputs), **extra}
