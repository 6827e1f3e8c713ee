"""Item 3: writes that cannot leave a lie. On a real small filesystem (a tmpfs mounted for the test)
that fills up mid-sweep: every file is whole or absent, the point that could not be written and the
sweep end FAILED in MLflow with the reason, never RUNNING, and no traceback; a full MLflow store
ends in exit 3 and the sync line, and the sync completes it once there is room."""

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import wait_for


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MB tmpfs: a real filesystem that runs out of space (needs root to mount)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> None:
    """Take every free byte of ``disk`` (the sweep's own records may have taken them first: then even
    the filler's directory entry finds no room, and the disk is just as full)."""
    try:
        with (disk / "filler").open("wb") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    except OSError:
        pass


def test_a_sweep_folder_that_fills_up_ends_failed_with_the_reason_and_no_half_files(ws, small_disk) -> None:
    sweep = small_disk / "sweep"
    # a short first point, then the disk fills while the second (40 prompts) measures
    short_then_slow = ["workload.num_prompts=4,40,48", "workload.output_len=32"]
    with ws.started("drafter=none", "batch=1", *short_then_slow, f"hydra.sweep.dir={sweep}", "-m") as proc:
        wait_for(lambda: (sweep / "0" / "results.json").exists(), 300, "the first point", proc)
        fill(small_disk)
        out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert "No space left on device" in out and str(sweep) in out
    for path in sweep.rglob("*"):
        if path.is_file() and path.name != "filler":
            assert not path.name.endswith(".tmp"), f"a temporary file was left: {path}"
            if path.suffix in (".json", ".png", ".html", ".csv"):
                assert path.stat().st_size > 0, f"{path} is empty"
            if path.suffix == ".json":
                json.loads(path.read_text())  # whole, never cut short
    assert json.loads((sweep / "sweep.json").read_text())["state"] in ("failed", "running")
    runs = ws.runs()
    assert "RUNNING" not in {r.info.status for r in runs}
    (parent,) = [r for r in runs if r.data.tags.get("specexp.role") == "parent"]
    assert parent.info.status == "FAILED"
    assert "No space left on device" in parent.data.tags["specexp.error"]
    points = [r for r in runs if r.data.tags.get("specexp.role") != "parent"]
    failed = [r for r in points if r.info.status == "FAILED"]
    assert failed and all("No space left on device" in r.data.tags["specexp.error"] for r in failed)
    for r in points:  # a FINISHED run has its results on disk, ok
        if r.info.status == "FINISHED":
            num = next(
                p
                for p in sweep.iterdir()
                if p.name.isdigit()
                and (p / "results.json").exists()
                and json.loads((p / "results.json").read_text()).get("run_id") == r.info.run_id
            )
            assert json.loads((num / "results.json").read_text())["status"] == "ok"
    ws.no_engine_left()


def test_a_full_mlflow_store_ends_in_exit_3_and_the_sync_line_and_sync_completes_it(ws, small_disk) -> None:
    uri = f"sqlite:///{small_disk / 'mlflow.db'}"
    # the store fills while the first point (40 prompts) measures; the second is short
    slow_then_short = ["workload.num_prompts=40,4", "workload.output_len=32"]
    with ws.started("drafter=none", "batch=1", *slow_then_short, f"tracking.uri={uri}", "-m") as proc:
        wait_for(lambda: list(ws.outputs.glob("multirun/*/0/server.json")), 300, "the first point", proc)
        fill(small_disk)
        out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 3, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    (sweep,) = ws.sweeps()
    assert f"python -m specexp.sync {sweep}" in out
    for num in ("0", "1"):  # measured and on disk
        assert json.loads((sweep / num / "results.json").read_text())["status"] == "ok"
    (small_disk / "filler").unlink()  # room again: the sync completes what the store lacks
    synced = ws.module("specexp.sync", str(sweep))
    assert synced.returncode == 0, synced.stdout + synced.stderr
    runs = ws.runs(uri)
    assert sorted(r.info.status for r in runs) == ["FINISHED"] * 3
    assert os.path.getsize(small_disk / "mlflow.db") > 0
