"""Item 6: an engine killed during the measured window: the point says so, with the exit code and the
server log's tail, and keeps the records it had already received, marked partial."""

import json
import os
import signal
import time

from tests.support.servers import wait_for


def test_engine_killed_mid_window_is_named_and_partial_records_are_kept(ws) -> None:
    no_warmup_window = "measure.warmup_windows=0"  # the kill must land in a measured window
    with ws.started(
        "drafter=none", "batch=2", "workload.num_prompts=400", "workload.output_len=32", no_warmup_window
    ) as proc:
        wait_for(lambda: list(ws.outputs.glob("runs/*/server.json")), 200, "the measured window", proc)
        folder = next(ws.outputs.glob("runs/*"))
        time.sleep(3)  # warm-up done, some measured requests finished
        (engine,) = wait_for(ws.engines, 10, "the engine process")
        os.kill(engine, signal.SIGKILL)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out[-3000:]
    results = json.loads((folder / "results.json").read_text())
    assert results["status"] == "failed"
    assert "server exited with code -9 (SIGKILL) during a measured window" in results["error"]
    assert "log tail" in results["error"] and "starting on http://" in results["error"]
    records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
    assert any(r["error"] is None and r["chunks"] for r in records), "the requests finished before the kill are lost"
    assert results["tags"]["specexp.records"] == "partial"
    (logged,) = ws.runs()
    assert logged.info.status == "FAILED" and logged.data.tags["specexp.records"] == "partial"
    assert "server exited with code -9" in out
