"""Every ``python -m specexp`` command of the README works as written, run as a dry run (nothing is
started, so the GPU engines' examples run here too); a cluster's launcher (SLURM) is left out."""

import re
import shlex

import pytest

from tests.conftest import REPO

NEEDS_A_CLUSTER = "submitit_slurm"


def readme_commands() -> list[str]:
    """The README's shell lines that run specexp itself, continuation lines joined, comments dropped."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    commands = [line.split("  #")[0].strip() for line in lines]
    return [c for c in commands if re.match(r"python -m specexp(\s|$)", c) and NEEDS_A_CLUSTER not in c]


COMMANDS = readme_commands()


def test_the_readme_has_its_examples() -> None:
    assert len(COMMANDS) >= 10
    assert any("model=kimi_k25" in c for c in COMMANDS) and any("+sweep=tune_depth" in c for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_readme_command_runs_as_a_dry_run(specexp, command: str) -> None:
    argv = shlex.split(command)[3:]
    if "--help" not in argv and "dry_run=true" not in argv:
        argv.append("dry_run=true")
    run = specexp(*argv, timeout=300)
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    study = any(a.startswith("+sweep=tune_") for a in argv)  # Optuna plans as it goes: no plan up front
    if "-m" in argv and not study:  # a grid: one compact plan, its placeholders named
        out = run.proc.stdout
        assert re.search(r"^dry run: \d+ points on \d+ server\(s\); nothing is started$", out, re.M), out[-2000:]
        assert out.count("  argv: ") == int(re.search(r"on (\d+) server", out)[1])  # each server's argv once
        if "ttt5" in command:
            assert "warning: drafter.path=/path/to/kimi-k2.5-eagle3-ttt5 is a placeholder" in out
    assert run.runs() == []
