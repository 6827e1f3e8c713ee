"""A second Ctrl-C while an interrupted launch collects what its groups left (found by CI: the sweep
then said "0 of 0 points kept", and its summary had lost the point measured before)."""

import json
import os
import signal
from pathlib import Path

import pytest

from specexp.result import PointResult
from specexp.sweep import skeleton as base
from specexp.sweep.groups import Group, Point
from specexp.sweep.job_plan import Job
from specexp.sweep.modes import OrderedSweeper
from specexp.sweep.skeleton import SweepRun, interrupt_line


@pytest.mark.usefixtures("sigint_handled")
def test_a_second_ctrl_c_while_collecting_keeps_every_point(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "0").mkdir()
    done = PointResult.from_params("ok", {"batch": 1})
    (tmp_path / "0" / "results.json").write_text(json.dumps(done.to_json()))
    group = Group(0, "key", 0, [Point(n, [f"batch={n + 1}"], None) for n in range(3)])
    monkeypatch.setattr(base, "form_groups", lambda jobs, first_point, first_group: [group])
    sweeper = object.__new__(OrderedSweeper)  # launch() as every sweeper has it

    def interrupted(run: SweepRun, groups: list[Group]):  # _dispatch: the first Ctrl-C, as the group runs
        raise KeyboardInterrupt
        yield  # a generator, as _dispatch is

    calls: list[list[str]] = []

    def settings(overrides: list[str]) -> dict[str, int]:
        calls.append(overrides)
        if len(calls) == 1:  # the second Ctrl-C, while the first one's collection reads the folder
            os.kill(os.getpid(), signal.SIGINT)
        return {"batch": int(overrides[0].split("=")[1])}

    sweeper._dispatch = interrupted
    sweeper.settings = settings
    run = SweepRun("abc", tmp_path)
    with pytest.raises(KeyboardInterrupt):
        sweeper.launch(run, [Job([], None, "key", "")] * 3)  # type: ignore[arg-type]
    assert [(r.status, r.batch) for r in run.points()] == [("ok", 1), ("interrupted", 2), ("interrupted", 3)]
    assert interrupt_line(run).startswith(f"interrupted: 1 of 3 points kept in {tmp_path}; ")
