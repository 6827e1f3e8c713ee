"""Item 10: ``-m``/``--multirun`` anywhere on specexp's command line, as users type it (the entry
point called in this process with that argv: a dry run starts nothing)."""

import pytest


@pytest.mark.parametrize(
    "argv",
    [
        ["drafter=none,tiny", "batch=1,4", "-m", "dry_run=true"],
        ["-m", "drafter=none,tiny", "batch=1,4", "dry_run=true"],
        ["drafter=none,tiny", "--multirun", "batch=1,4", "dry_run=true"],
    ],
    ids=["middle", "first", "long-form"],
)
def test_multirun_flag_anywhere(idle_ws, argv) -> None:
    run = idle_ws.main(*argv)
    assert run.returncode == 0, run.stderr[-3000:]
    # one plan for the sweep: the multirun took every override
    assert "dry run: 4 points on 2 server(s); nothing is started" in run.stdout
