"""The docs site builds with ``mkdocs build --strict``, as CI builds it: a broken link or anchor, a
page left out of the navigation or a missing included file fails the build. Skipped only where
MkDocs is not installed and CI is unset (``pip install -e '.[dev]'`` installs it); a developer
skips it with ``-k 'not mkdocs'``. About a second and a half per build."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None and not os.environ.get("CI"),
    reason="no mkdocs: pip install -e '.[dev]'",
)


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(root / "mkdocs.yml")]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([*argv, "--site-dir", str(site)], cwd=root, env=env, capture_output=True, text=True)


def test_the_site_builds_with_mkdocs_strict(tmp_path: Path) -> None:
    run = build(ROOT, tmp_path / "site")
    assert run.returncode == 0, run.stderr[-3000:]
    pages = {p.parent.name for p in (tmp_path / "site").rglob("index.html")}
    assert {"getting-started", "envelope", "config", "METRICS", "architecture", "results"} <= pages
    assert "how the code is laid out" in (tmp_path / "site" / "architecture" / "index.html").read_text()


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """The build's checks are on: a copy of the site with one link to a page that does not exist."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path)
    shutil.copy(ROOT / "ARCHITECTURE.md", tmp_path)
    with (tmp_path / "docs" / "index.md").open("a") as page:
        page.write("\nSee [the missing page](guides/missing.md).\n")
    run = build(tmp_path, tmp_path / "site")
    assert run.returncode != 0
    assert "guides/missing.md" in run.stderr
