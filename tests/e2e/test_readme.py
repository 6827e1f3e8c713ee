"""Every command of the README and of the docs pages (docs/**.md) works as written.

``python -m specexp`` commands run as dry runs in the test's process (tests.support.inprocess:
the app's entry point as the process would call it, nothing started, so the GPU engines' examples
run here too); a cluster's launcher (SLURM) is left out. A command on several pages runs once. The
other entry points (``python -m specexp.report``, scripts, benchmarks) are checked for existence:
running them needs a sweep or minutes, and their own tests run them.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import REPO

NEEDS_A_CLUSTER = ("submitit_slurm", "$SLURM")  # a SLURM launcher, or a job script's variables
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def shell_lines(page: Path) -> list[str]:
    """A page's lines in ```bash blocks (indented ones included), continuations joined, comments dropped."""
    text = page.read_text(encoding="utf-8")
    blocks = [body for _, body in re.findall(r"^( *)```bash\n(.*?)^\1```", text, re.M | re.S)]
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [" ".join(line.split("  #")[0].split()) for line in lines if line.strip()]


def commands(pages: list[Path]) -> list[str]:
    """The ``python -m specexp`` commands of ``pages`` as dry runs, each once, in the order they first
    appear (a command shown both as it runs and as its dry run is one)."""
    found = [c for p in pages for c in shell_lines(p) if re.match(r"python -m specexp(\s|$)", c)]
    dry = [c if "--help" in c or "dry_run=true" in c else f"{c} dry_run=true" for c in found]
    return list(dict.fromkeys(c for c in dry if not any(n in c for n in NEEDS_A_CLUSTER)))


README = commands(PAGES[:1])
DOCS = [c for c in commands(PAGES) if c not in README]  # the pages' own: a README command runs once


def test_the_readme_and_the_docs_have_their_examples() -> None:
    assert "python -m specexp drafter=none,tiny batch=1,4,8,16 -m dry_run=true" in README
    assert any("model=kimi_k25" in c and "dry_run=true" in c for c in README)
    assert len(README + DOCS) >= 18
    assert any("+sweep=tune_depth" in c for c in DOCS) and any("load=rate" in c for c in DOCS)


@pytest.mark.parametrize("command", README)
def test_a_readme_command_runs_as_a_dry_run(specexp_main, command: str) -> None:
    runs_as_a_dry_run(specexp_main, command)


@pytest.mark.parametrize("command", DOCS)
def test_a_docs_command_runs_as_a_dry_run(specexp_main, command: str) -> None:
    runs_as_a_dry_run(specexp_main, command)


def from_the_repository(arg: str) -> str:
    """``key=path`` with a repository path made absolute: a page's commands run from the repository's
    root, the test in its own folder."""
    key, eq, value = arg.partition("=")
    return f"{key}={REPO / value}" if eq and "/" in value and (REPO / value).exists() else arg


def runs_as_a_dry_run(specexp_main, command: str) -> None:
    argv = [from_the_repository(a) for a in shlex.split(command)[3:]]
    run = specexp_main(*argv)
    assert run.proc.returncode == 0, (run.proc.stdout + run.proc.stderr)[-3000:]
    study = any(a.startswith("+sweep=tune_") for a in argv)  # Optuna plans as it goes: no plan up front
    if "-m" in argv and not study:  # a grid: one compact plan, its placeholders named
        out = run.proc.stdout
        assert re.search(r"^dry run: \d+ points on \d+ server\(s\); nothing is started$", out, re.M), out[-2000:]
        assert out.count("  argv: ") == int(re.search(r"on (\d+) server", out)[1])  # each server's argv once
        if "ttt5" in command:
            assert "warning: drafter.path=/path/to/kimi-k2.5-eagle3-ttt5 is a placeholder" in out
    assert run.runs() == []


OTHER = re.compile(r"(?:\.venv/bin/)?python (?:-m (?P<module>[\w.]+)|(?P<script>[\w/.-]+\.py))|(?P<sh>scripts/\S+\.sh)")


def other_commands() -> list[tuple[str, str]]:
    """Each documented command of another entry point: ("module" or "file", what it names)."""
    named = []
    for page in PAGES:
        for line in shell_lines(page):
            found = OTHER.match(line)
            if found and found["module"] != "specexp" and found["module"] != "pytest":
                kind = "module" if found["module"] else "file"
                named.append((kind, found["module"] or found["script"] or found["sh"]))
    return list(dict.fromkeys(named))


def test_every_other_documented_entry_point_exists() -> None:
    named = other_commands()
    assert ("module", "specexp.report") in named and ("file", "scripts/config_reference.py") in named
    missing = [n for kind, n in named if not (importlib.util.find_spec(n) if kind == "module" else (REPO / n).exists())]
    assert missing == []
