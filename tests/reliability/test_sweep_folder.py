"""Issue 37, item 5: a sweep folder path that cannot be a folder is refused in one line, exit 2.

The app's entry point runs in this process (``idle_ws.main``); dry runs start no engine."""

from pathlib import Path

import pytest

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
