"""Item 1: specexp measures only the server it launched.

Someone else's healthy server on ``engine.port`` must never be measured in place of the one
specexp asked for (here: a server without a drafter standing in for ``drafter=tiny``).
"""

import json
import sys

from tests.reliability.conftest import foreign_server
from tests.support.servers import free_port, wait_for


def test_a_port_in_use_fails_before_launch_naming_the_port(ws) -> None:
    port = free_port()
    with foreign_server(ws, port):
        run = ws.run("drafter=tiny", f"engine.port={port}", timeout=300)
    assert run.returncode == 2, run.stderr[-3000:]
    assert "engine.port" in run.stderr and str(port) in run.stderr and "Fix:" in run.stderr
    assert not (ws.outputs / "servers").exists()  # nothing was launched
    assert ws.runs() == [] and not list(ws.outputs.glob("runs/*/results.json"))


def test_a_server_that_is_not_the_launched_one_is_never_measured(ws) -> None:
    """The port is free when specexp checks it; the engine binds late (a slow launcher), and in the
    meantime another server takes the port and answers every readiness probe."""
    port = free_port()
    slow = f"engine.launcher=[{sys.executable},'-c','import time; time.sleep(300)']"
    with ws.started("drafter=tiny", f"engine.port={port}", slow, "engine.startup_timeout_s=150") as proc:
        wait_for(lambda: list(ws.outputs.glob("servers/*.log")), 120, "the slow launch", proc)
        with foreign_server(ws, port):
            out, _ = proc.communicate(timeout=200)
    assert proc.returncode == 1, out[-3000:]
    (results,) = [json.loads(p.read_text()) for p in ws.outputs.glob("runs/*/results.json")]
    assert results["status"] == "failed"
    assert "not the server specexp launched" in results["error"], results["error"]
    (logged,) = ws.runs()
    assert logged.info.status == "FAILED" and "accept_length" not in logged.data.metrics
    ws.no_engine_left()
