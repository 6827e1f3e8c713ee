"""Fail when specexp/ grows a hub again: a module over 450 lines (the metric registry, a table of
declarations, excepted), a module of specexp/point/ over 300, or a function over 100 lines
(ARCHITECTURE.md: small rooms, one job each). Run from the repository root; exit 1 naming each."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODULE_LINES = 450
POINT_LINES = 300
FUNCTION_LINES = 100
EXCEPTED = {"specexp/metrics/registry.py"}


def problems(root: Path) -> list[str]:
    """Every module and function over its limit under ``root``/specexp, as ``path:line: what``."""
    found = []
    for path in sorted((root / "specexp").rglob("*.py")):
        name = path.relative_to(root).as_posix()
        text = path.read_text()
        lines = len(text.splitlines())
        limit = POINT_LINES if name.startswith("specexp/point/") else MODULE_LINES
        if lines > limit and name not in EXCEPTED:
            found.append(f"{name}:1: {lines} lines (at most {limit}): split it by job")
        for node in ast.walk(ast.parse(text, name)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_LINES:
                    found.append(f"{name}:{node.lineno}: {node.name}() is {length} lines (at most {FUNCTION_LINES})")
    return found


def main() -> int:
    found = problems(Path.cwd())
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
