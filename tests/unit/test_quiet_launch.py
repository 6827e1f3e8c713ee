"""Hydra's own lines (issue 38, item 4): "Launching 1 jobs locally" for each server group of a sweep
says nothing the live lines do not, so it is kept quiet; ``hydra.verbose=hydra`` shows it again.
The app's entry point runs in this process (tests.support.inprocess); a dry run starts nothing."""

from __future__ import annotations

from pathlib import Path

from tests.support.inprocess import main

SWEEP = ["drafter=none", "batch=1,2", "dry_run=true", "-m"]


def test_hydras_launch_lines_are_quiet_unless_asked_for(tmp_path: Path) -> None:
    env = {"SPECEXP_OUTPUTS": str(tmp_path / "outputs")}
    quiet = main([*SWEEP, f"hydra.sweep.dir={tmp_path / 'a'}"], tmp_path, env)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "dry run: 2 points on 1 server(s)" in quiet.stdout
    assert not any("jobs locally" in line for line in quiet.lines), quiet.lines
    asked = main([*SWEEP, f"hydra.sweep.dir={tmp_path / 'b'}", "hydra.verbose=hydra"], tmp_path, env)
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert any("Launching 1 jobs locally" in line for line in asked.lines), asked.lines
