"""Live reference servers for the tests: each configuration starts once per session, on a free port,
in its own process group (killed at teardown), on the tiny model built into the tests' own outputs
(reused across runs)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from specexp.models.tiny import TinyPaths, ensure_tiny
from specexp.servers import serve_reference as serve
from tests.conftest import REPO
from tests.reference.client import K


@pytest.fixture(scope="session")
def tiny(shared_outputs: Path) -> TinyPaths:
    return ensure_tiny(shared_outputs)


@dataclass
class LiveServer:
    url: str
    log: Path


def _server_fixture(*args: str, draft: str | None = None):
    """A session fixture serving the tiny target (16 slots, 1 torch thread), drafting with ``draft``.

    A server that fails to start raises ServerStartError with its log: the tests using it error out."""

    @pytest.fixture(scope="session")
    def fixture(tiny: TinyPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
        argv = ["--model", str(tiny.target), "--served-model-name", "tiny", "--threads", "1"]
        argv += ["--max-running-requests", "16", *args]
        if draft:
            argv += ["--draft-model", str(getattr(tiny, draft)), "--num-speculative-tokens", str(K)]
        log = tmp_path_factory.mktemp("server") / "server.log"
        with serve(argv, log, cwd=REPO) as url:
            yield LiveServer(url, log)

    return fixture


plain_server = _server_fixture("--num-continuous-decode-steps", "1")
# Fewer slots than the 32-request test sends, and decode steps > 1: queueing and late admission are exercised.
draft_server = _server_fixture("--num-continuous-decode-steps", "3", draft="draft")
self_server = _server_fixture("--num-continuous-decode-steps", "1", draft="tiny_self")
ngram_server = _server_fixture(
    "--num-continuous-decode-steps", "2", "--speculative-method", "ngram", "--num-speculative-tokens", str(K)
)
