"""Item 2: an engine's death is named however the client first sees it (a refused or reset
connection is checked against the server's process before it becomes the point's reason), and the
windows that finished before it keep their metrics in results.json and MLflow."""

import json
import os
import signal
import time

import pytest

from tests.support.servers import wait_for


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_engine_death_after_a_window_is_named_and_the_finished_windows_keep_their_metrics(ws, sig) -> None:
    windows = ["measure.windows=12", "measure.max_windows=12", "workload.num_prompts=30", "workload.output_len=32"]
    windows.append("measure.warmup_windows=0")  # the kill must land after measured windows
    with ws.started("drafter=none", "batch=2", *windows) as proc:
        wait_for(lambda: list(ws.outputs.glob("runs/*/server.json")), 200, "the measured windows", proc)
        folder = next(ws.outputs.glob("runs/*"))
        time.sleep(4)  # warm-up done, some windows finished
        (engine,) = wait_for(ws.engines, 10, "the engine process")
        os.kill(engine, sig)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out[-3000:]
    results = json.loads((folder / "results.json").read_text())
    assert results["status"] == "failed"
    assert results["error"].startswith("server exited with code"), results["error"][:500]
    assert results["windows"], "the windows finished before the death lost their metrics"
    assert results["metrics"]["output_throughput"] > 0
    assert results["tags"]["specexp.records"] == "partial"
    (logged,) = ws.runs()
    assert logged.info.status == "FAILED" and logged.data.tags["specexp.records"] == "partial"
    assert logged.data.metrics["output_throughput"] == pytest.approx(results["metrics"]["output_throughput"])
