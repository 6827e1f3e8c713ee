"""Issue 37, items 1, 5 and 8's resume: a sweep folder path that cannot be a folder is refused in one
line, exit 2; a sweep folder has one live owner; ``resume=latest`` takes only this user's sweeps
from this outputs folder, and says which.

The app's entry point runs in this process (``idle_ws.main``); dry runs start no engine. Two
processes on one folder cost no second process: the test holds the folder's lock itself
(``folder.own``, as a sweep's process does), and the app, in this process, opens the lock file
again, an open file the lock refuses as it refuses another process's."""

import json
import os
import socket
from pathlib import Path

import pytest

from specexp.sweep import folder
from tests.reliability.test_input import one_line

SWEEP = ("drafter=none", "dry_run=true", "batch=1,2", "-m")


def bad_path(root: Path, case: str) -> tuple[Path, str]:
    """A sweep folder path that cannot be one, and what its refusal says."""
    (root / "loop1").symlink_to(root / "loop2")
    (root / "loop2").symlink_to(root / "loop1")
    (root / "a-file").write_text("mine")
    (root / "dangling").symlink_to(root / "absent")
    return {
        "symlink-loop": (root / "loop1", f"{root / 'loop1'} cannot be used as a folder: Too many levels of symbolic"),
        "a-file": (root / "a-file", f"{root / 'a-file'} is a file, not a folder"),
        "under-a-file": (root / "a-file" / "sweep", f"{root / 'a-file'} is a file, so {root / 'a-file' / 'sweep'}"),
        "under-a-dangling-link": (
            root / "dangling" / "sweep",
            f"{root / 'dangling'} is a link to {root / 'absent'}, which does not exist",
        ),
        "under-proc": (
            Path("/proc/specexp-sweep"),
            "/proc/specexp-sweep cannot be made: /proc: it takes no new folders",
        ),
    }[case]


@pytest.mark.parametrize("case", ["symlink-loop", "a-file", "under-a-file", "under-a-dangling-link", "under-proc"])
@pytest.mark.parametrize("how", ["command-line", "interpolated"])
def test_a_sweep_folder_that_cannot_be_one_is_one_line_and_exit_2(idle_ws, monkeypatch, case, how) -> None:
    """Named on the command line (app.check_folders) or reached through an interpolation, which only
    the sweeper sees."""
    path, words = bad_path(idle_ws.root, case)
    given = str(path)
    if how == "interpolated":
        monkeypatch.setenv("SPECEXP_TEST_SWEEP_DIR", str(path))
        given = "${oc.env:SPECEXP_TEST_SWEEP_DIR}"
    line = one_line(idle_ws.main(*SWEEP, f"hydra.sweep.dir={given}"))
    assert f"invalid configuration: hydra.sweep.dir: {words}" in line, line
    assert "Fix: give hydra.sweep.dir a folder you can write to" in line


def test_a_folder_a_live_sweep_owns_is_refused_naming_the_owner(idle_ws) -> None:
    sweep = idle_ws.root / "sweep"
    sweep.mkdir()
    held = folder.own(sweep)
    try:
        line = one_line(idle_ws.main(*SWEEP, f"hydra.sweep.dir={sweep}"))
    finally:
        held.release()
    assert f"hydra.sweep.dir: {sweep} belongs to a sweep running now (host {socket.gethostname()}, " in line
    assert f"pid {os.getpid()}, since " in line
    assert "Fix: give another hydra.sweep.dir, or wait until pid" in line
    assert sorted(p.name for p in sweep.iterdir()) == [folder.LOCK]  # nothing written beside the lock


def test_resuming_a_sweep_a_live_process_owns_is_refused(idle_ws) -> None:
    sweep = idle_ws.outputs / "multirun" / "s1"
    sweep.mkdir(parents=True)
    folder.write_record(sweep, {"sweep_id": "s1", "started": "2026-01-01T00:00:00", "outputs": str(idle_ws.outputs)})
    held = folder.own(sweep)
    try:
        line = one_line(idle_ws.main(*SWEEP, "resume=s1"))
    finally:
        held.release()
    assert f"{sweep} belongs to a sweep running now" in line


def test_a_lock_a_dead_sweep_left_is_taken_over_and_said(idle_ws) -> None:
    sweep = idle_ws.root / "sweep"
    sweep.mkdir()
    (sweep / folder.LOCK).write_text(json.dumps({"host": "gone", "pid": 999999, "started": "2026-01-01T00:00:00"}))
    run = idle_ws.main(*SWEEP, f"hydra.sweep.dir={sweep}")
    assert run.returncode == 0, run.stderr[-2000:]
    said = [line for line in run.lines if "taken over" in line]
    assert said == [
        f"{sweep}: taken over from a sweep that is no longer running (host gone, pid 999999, since 2026-01-01T00:00:00)"
    ]
    assert (sweep / folder.LOCK).read_text() == ""  # released at the end: free, and no dead owner named
    again = folder.own(sweep)
    again.release()
    assert again.took_over is None


def test_a_folder_freed_by_a_refused_sweep_can_be_owned_at_once(idle_ws) -> None:
    sweep = idle_ws.root / "sweep"
    sweep.mkdir()
    run = idle_ws.main("drafter=none", "batch=1,abc", "-m", f"hydra.sweep.dir={sweep}")
    assert run.returncode == 2
    assert (sweep / folder.LOCK).read_text() == ""  # it was owned, and let go cleanly
    folder.own(sweep).release()  # raises ConfigError if the refused sweep still held it


def write_sweep(root: Path, name: str, started: str, outputs: Path) -> Path:
    sweep = root / "multirun" / name
    sweep.mkdir(parents=True)
    folder.write_record(sweep, {"sweep_id": f"id-{name}", "started": started, "outputs": str(outputs)})
    return sweep


def test_resume_latest_takes_only_sweeps_started_from_this_outputs_folder_and_says_which(idle_ws) -> None:
    out = idle_ws.outputs
    ours = write_sweep(out, "ours", "2026-01-01T00:00:00", out)
    write_sweep(out, "copied", "2026-01-02T00:00:00", idle_ws.root / "elsewhere")  # newer, from elsewhere
    run = idle_ws.main(*SWEEP, "resume=latest")
    assert run.returncode == 0, run.stderr[-2000:]
    said = [line for line in run.lines if line.startswith("resuming sweep")]
    assert said == [
        f"resuming sweep id-ours in {ours} (resume=latest: the newest you started from {out}): "
        "0 point(s) finished ok already"
    ], run.lines


def test_resume_latest_skips_another_users_sweeps(idle_ws, monkeypatch) -> None:
    out = idle_ws.outputs
    write_sweep(out, "one", "2026-01-01T00:00:00", out)
    newest = write_sweep(out, "two", "2026-01-02T00:00:00", out)
    assert folder.find(folder.LATEST, out) == newest
    uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: uid + 1)  # this user is now another one than the files'
    line = one_line(idle_ws.main(*SWEEP, "resume=latest"))
    assert f"resume: no sweep of yours under {out / 'multirun'} (2 of other users or outputs folders skipped)" in line


@pytest.mark.parametrize("case", ["symlink-loop", "a-file", "under-a-file", "under-proc"])
def test_a_run_folder_that_cannot_be_one_is_one_line_and_exit_2(idle_ws, case) -> None:
    path, words = bad_path(idle_ws.root, case)
    line = one_line(idle_ws.main("drafter=none", "dry_run=true", f"hydra.run.dir={path}"))
    assert f"invalid configuration: hydra.run.dir: {words}" in line, line
    assert "Fix: give hydra.run.dir a folder you can write to" in line


def test_a_sweep_leaves_no_empty_log_in_its_groups_folders(idle_ws) -> None:
    # issue 37: every sweep left a 0-byte groups/0/app.log (Hydra's job log, which nothing wrote to)
    sweep = idle_ws.root / "sweep"
    run = idle_ws.main(*SWEEP, f"hydra.sweep.dir={sweep}")
    assert run.returncode == 0, run.stderr[-2000:]
    assert (sweep / "groups" / "0" / "group.json").exists()
    assert [p for p in sweep.rglob("*.log") if p.stat().st_size == 0] == []
