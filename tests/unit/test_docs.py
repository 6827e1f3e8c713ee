"""docs/reference/config.md is generated from the schemas (``python scripts/config_reference.py``), so
the keys users read are the ones the config accepts; and the site's pages name only paths that exist."""

from __future__ import annotations

import dataclasses
import re
import runpy
from pathlib import Path

import pytest

from tests.unit.test_architecture import named_paths

ROOT = Path(__file__).resolve().parents[2]
reference = runpy.run_path(str(ROOT / "scripts" / "config_reference.py"))


def test_the_config_reference_is_generated_from_the_schemas() -> None:
    current = reference["DOC_PATH"].read_text(encoding="utf-8")
    assert current == reference["render"](), "run: python scripts/config_reference.py"


def test_every_key_has_a_type_a_default_and_a_meaning() -> None:
    rows = [line for line in reference["render"]().splitlines() if line.startswith("| `")]
    assert len(rows) > 80
    cells = [[c.strip() for c in row.strip("|").split(" | ")] for row in rows]
    assert [c[0] for c in cells if len(c) != 4 or not all(c)] == []
    keys = {c[0] for c in cells}
    assert {"`batch`", "`workload.output_len`", "`engine.python`", "`hydra.sweeper.crossover.max_points`"} <= keys


@dataclasses.dataclass
class Knobs:
    """A schema as specexp/config/ writes them: a comment above a field, or on its line."""

    # How many widgets, per window.
    widgets: int | None = None
    _hidden: str = "x"
    names: list[str] = dataclasses.field(default_factory=list)  # the widgets' names


def test_a_schema_field_becomes_a_row_with_its_comment() -> None:
    rows = reference["rows"]("knobs.", Knobs, set())
    assert rows == [
        "| `knobs.widgets` | int or null | `null` | How many widgets, per window. |",
        "| `knobs.names` | list of str | `[]` | the widgets' names |",
    ]


# Folders of the repository; a page's other paths (outputs/, plots/, .submitit/) are what a run writes.
TRACKED = ("specexp/", "tests/", "scripts/", "benchmarks/", "conf/", "sweeps/", "docs/", "hydra_plugins/")
PAGES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))


@pytest.mark.parametrize("page", [p for p in PAGES if p not in ("docs/engines.md",)])
def test_every_path_a_page_names_exists(page: str) -> None:
    paths = [p for p in named_paths(page) if p.startswith(TRACKED) and not p.startswith("tests/outputs/")]
    assert [p for p in paths if not (ROOT / p).exists()] == []


def test_the_readme_stays_short_and_its_links_lead_somewhere() -> None:
    """A first read of five minutes (issue 38); the rest is on the site, whose own links mkdocs checks."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 150
    links = [link.split("#")[0] for link in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in link]
    assert len(links) >= 8
    assert [link for link in links if not (ROOT / link).is_file()] == []
