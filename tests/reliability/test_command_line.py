"""Item 10: ``-m``/``--multirun`` anywhere on specexp's command line, as users type it."""

import json

import pytest


def dry_runs(text: str) -> list[dict]:
    """The JSON objects a dry run prints (from a line "{" to a line "}"), among Hydra's own lines."""
    found, block = [], None
    for line in text.splitlines():
        if line == "{":
            block = []
        if block is not None:
            block.append(line)
        if line == "}" and block is not None:
            found.append(json.loads("\n".join(block)))
            block = None
    return found


@pytest.mark.parametrize(
    "argv",
    [
        ["drafter=none,tiny", "batch=1,4", "-m", "dry_run=true"],
        ["-m", "drafter=none,tiny", "batch=1,4", "dry_run=true"],
        ["drafter=none,tiny", "--multirun", "batch=1,4", "dry_run=true"],
    ],
    ids=["middle", "first", "long-form"],
)
def test_multirun_flag_anywhere(ws, argv) -> None:
    run = ws.run(*argv, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    shown = dry_runs(run.stdout)
    assert len(shown) == 4  # one dry run per point: the multirun took every override
    assert len({s["server_key"] for s in shown}) == 2
