"""Item 1: a hung engine (SIGSTOP: its sockets stay open, nothing fails, nothing arrives) is found by
the stall watchdog: the point fails saying so, the stopped server's process group is killed, and the
sweep's next point runs on a fresh server."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from specexp.load.progress import Progress
from specexp.point.watch import stalled
from specexp.servers import Server
from tests.support.servers import wait_for

STALL_S = 3


def test_a_stopped_engine_fails_its_point_and_the_next_point_gets_a_fresh_server(ws) -> None:
    # the first point (200 prompts) is still measuring when its engine stops; the second is short
    slow_then_short = [
        "workload.num_prompts=200,4",
        "workload.output_len=32",
        "measure.windows=1",
        "measure.max_windows=1",
    ]
    stall = f"engine.stall_s={STALL_S}"
    with ws.started("drafter=none", "batch=2", *slow_then_short, stall, "arms=sequential", "-m") as proc:
        wait_for(lambda: list(ws.outputs.glob("multirun/*/0/server.json")), 200, "the first point's server", proc)
        time.sleep(2)
        (engine,) = wait_for(ws.engines, 10, "the engine process")
        os.kill(engine, signal.SIGSTOP)
        stopped = time.monotonic()
        first = wait_for(lambda: list(ws.outputs.glob("multirun/*/0/results.json")), 120, "the stalled point", proc)
        detected = time.monotonic() - stopped
        out, _ = proc.communicate(timeout=300)
    print(f"stall detected {detected:.1f} s after SIGSTOP (engine.stall_s={STALL_S})")
    status = Path(f"/proc/{engine}/status")
    assert not status.exists() or "State:\tZ" in status.read_text(), "the stopped engine was not killed"
    sweep = first[0].parent.parent
    stalled = json.loads((sweep / "0" / "results.json").read_text())
    assert stalled["status"] == "failed", stalled
    assert f"engine stalled: no token for {STALL_S} s with 2 requests in flight during" in stalled["error"]
    assert "process state: stopped" in stalled["error"]
    after = json.loads((sweep / "1" / "results.json").read_text())
    assert after["status"] == "ok", after["error"]
    assert after["tags"]["specexp.server_reused"] == "false"  # a fresh launch, not the killed one
    runs = {r.data.tags.get("mlflow.runName"): r for r in ws.runs() if r.data.tags.get("specexp.role") != "parent"}
    assert sorted(r.info.status for r in runs.values()) == ["FAILED", "FINISHED"]
    assert "engine stalled" in out
    ws.no_engine_left()


def test_an_engine_stopped_while_starting_fails_within_stall_s_not_the_startup_timeout(ws) -> None:
    with ws.started("drafter=none", f"engine.stall_s={STALL_S}") as proc:
        (engine,) = wait_for(ws.engines, 60, "the engine process", proc)
        os.kill(engine, signal.SIGSTOP)
        out, _ = proc.communicate(timeout=60)  # engine.startup_timeout_s is 180 s for engine=torch
    assert proc.returncode == 1, out[-3000:]
    assert f"engine stalled while starting: every process stopped for {STALL_S} s" in out, out[-3000:]
    assert "process state: stopped" in out
    ws.no_engine_left()


def test_a_client_timeout_shorter_than_stall_s_does_not_hide_a_stopped_engine(ws) -> None:
    # Each request gives up after 2 s and the next is sent at once: found on the probe with
    # request_timeout_s=20 (under the 30 s default), where the timeouts kept the clock moving for 12 min.
    slow = ["workload.num_prompts=200", "workload.output_len=32", "measure.windows=1", "measure.max_windows=1"]
    with ws.started("drafter=none", "batch=1", *slow, f"engine.stall_s={STALL_S}", "request_timeout_s=2") as proc:
        wait_for(lambda: list(ws.outputs.glob("runs/*/server.json")), 200, "the point's server", proc)
        time.sleep(2)
        (engine,) = wait_for(ws.engines, 10, "the engine process")
        os.kill(engine, signal.SIGSTOP)
        out, _ = proc.communicate(timeout=120)  # 200 requests timing out one by one would take 400 s
    assert proc.returncode == 1, out[-3000:]
    (folder,) = ws.outputs.glob("runs/*")
    result = json.loads((folder / "results.json").read_text())
    assert f"engine stalled: no token for {STALL_S} s with 1 request" in result["error"], result["error"][:500]
    assert "process state: stopped" in result["error"]
    ws.no_engine_left()


def silent_for(seconds: float, requests: int) -> Progress:
    clock = Progress(in_flight=requests)
    clock.last -= seconds
    return clock


def test_a_stall_says_only_what_specexp_did_to_the_server(tmp_path: Path) -> None:
    # issue 37: an endpoint specexp did not launch (engine=external) was said to have its process group killed
    endpoint = Server("ext", "http://10.0.0.9:8000", None, None, 0.0, None)
    said = str(stalled(endpoint, "during window 2", 3, silent_for(4, 2)))
    assert said.startswith("engine stalled: no token for 4 s with 2 requests in flight during window 2")
    assert "http://10.0.0.9:8000 was not launched by specexp: its requests were abandoned" in said
    assert "killed" not in said and "process state" not in said
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a launched engine: its own group
    launched = Server("own", "http://127.0.0.1:1", sleeper, tmp_path / "absent.log", 0.0, None)
    said = str(stalled(launched, "during window 1", 3, silent_for(3, 1)))
    assert "1 request in flight" in said and "process state: " in said and "; its process group was killed" in said
    assert sleeper.poll() in (-signal.SIGTERM, -signal.SIGKILL)
