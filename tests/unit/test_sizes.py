"""The size check CI runs beside ruff (scripts/check_sizes.py): it names an oversized module and an
overlong function, and the package passes it."""

from __future__ import annotations

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
check = runpy.run_path(str(ROOT / "scripts" / "check_sizes.py"))


def test_an_oversized_module_and_an_overlong_function_are_named(tmp_path: Path) -> None:
    (tmp_path / "specexp" / "point").mkdir(parents=True)
    body = "".join(f"    x{i} = {i}\n" for i in range(101))
    (tmp_path / "specexp" / "long.py").write_text("def long():\n" + body)
    (tmp_path / "specexp" / "point" / "big.py").write_text("x = 1\n" * 301)
    (tmp_path / "specexp" / "fine.py").write_text("x = 1\n" * 450)
    found = check["problems"](tmp_path)
    assert found == [
        "specexp/long.py:1: long() is 102 lines (at most 100)",
        "specexp/point/big.py:1: 301 lines (at most 300): split it by job",
    ]


def test_the_package_is_within_its_sizes() -> None:
    assert check["problems"](ROOT) == []
