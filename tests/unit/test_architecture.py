"""The docs that say where code lives name only paths that exist (ARCHITECTURE.md, docs/engines.md)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A repository path in backquotes: a file with an extension, or a folder ending in "/".
PATH = re.compile(r"`((?:[\w.-]+/)+(?:[\w.-]+\.\w+)?|[\w-]+\.(?:md|py|toml|sh))`")


def named_paths(doc: str) -> list[str]:
    return PATH.findall((ROOT / doc).read_text())


@pytest.mark.parametrize("doc", ["ARCHITECTURE.md", "docs/engines.md"])
def test_every_path_a_doc_names_exists(doc: str) -> None:
    paths = named_paths(doc)
    assert len(paths) > 5 if doc == "ARCHITECTURE.md" else paths
    assert [p for p in paths if not (ROOT / p).exists()] == []


def test_a_path_that_does_not_exist_is_caught(tmp_path: Path) -> None:
    assert PATH.findall("see `specexp/point/plan.py` and `specexp/gone/` and `pyproject.toml`") == [
        "specexp/point/plan.py",
        "specexp/gone/",
        "pyproject.toml",
    ]
    assert not (ROOT / "specexp/gone/").exists()


def test_no_module_is_named_like_a_standard_library_module() -> None:
    """A module named ``trace`` or ``profile`` shadows the standard library's for whoever runs a file
    beside it, and misleads a reader (issue 34): names say what they hold."""
    names = {p.stem for p in (ROOT / "specexp").rglob("*.py")}
    assert sorted(names & set(sys.stdlib_module_names)) == []


def test_no_two_modules_share_a_name() -> None:
    """``windows`` in two packages (or ``plan``, ``base``, ``engine``) makes a reader open the wrong one
    (issue 34): every module's name is its own."""
    stems = [p.stem for p in (ROOT / "specexp").rglob("*.py") if p.stem not in ("__init__", "__main__")]
    assert sorted({s for s in stems if stems.count(s) > 1}) == []
