"""Item 5: Ctrl-C reads like a tool: one line saying what was kept and how to resume, no traceback,
exit 130; a second Ctrl-C while the sweep tears down still leaves the parent KILLED and no engine."""

import json
import signal
import time

import pytest

from tests.reliability.test_interrupts import parent_of
from tests.support.servers import wait_for

# Three points on one server: a short one kept, then two of 20 prompts, Ctrl-C in the second.
POINTS = ["drafter=none", "batch=1", "workload.num_prompts=4,20,24", "workload.output_len=32"]


@pytest.mark.parametrize("second_after_s", [None, 0.5, 3.0], ids=["once", "twice-at-once", "twice-in-teardown"])
def test_ctrl_c_says_what_was_kept_in_one_line_and_exits_130(ws, second_after_s) -> None:
    with ws.started(*POINTS, "-m") as proc:
        wait_for(lambda: list(ws.outputs.glob("multirun/*/1/server.json")), 300, "the second point", proc)
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        if second_after_s is not None:
            time.sleep(second_after_s)
            proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    (sweep,) = ws.sweeps()
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"interrupted: 1 of 3 points kept in {sweep}; resume with: python -m specexp "), last
    assert last.endswith(f" resume={json.loads((sweep / 'sweep.json').read_text())['sweep_id']} -m"), last
    ws.no_engine_left()
    assert parent_of(ws).info.status == "KILLED"
    assert "RUNNING" not in {r.info.status for r in ws.runs()}


def test_ctrl_c_held_down_after_the_line_still_exits_130(ws) -> None:
    """Found running the test above here: a Ctrl-C once the line was said, while the interpreter
    shut down (torch's and MLflow's exit hooks), killed specexp by SIGINT (exit -2) instead of 130."""
    with ws.started("drafter=none", "workload.num_prompts=20", "workload.output_len=32") as proc:
        wait_for(lambda: list(ws.outputs.glob("runs/*/server.json")), 300, "the point", proc)
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        said = []
        for line in proc.stdout:  # what it says until its one line on what was kept
            said.append(line)
            if line.startswith("interrupted:"):
                break
        while proc.poll() is None:  # Ctrl-C held down until it has exited
            proc.send_signal(signal.SIGINT)
            time.sleep(0.005)
        said += proc.stdout.readlines()
    out = "".join(said)
    assert proc.returncode == 130, out[-3000:]
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    ws.no_engine_left()
