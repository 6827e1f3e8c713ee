"""The suite's xdist groups (tests/conftest.py) take effect: a shared server's tests on one worker."""

from __future__ import annotations

import os

import pytest

from tests.conftest import xdist_group


def test_each_test_runs_in_its_group_under_xdist(request: pytest.FixtureRequest) -> None:
    """Under ``-n 2 --dist loadgroup`` a test's node id carries its group; a pytest or xdist upgrade that
    drops it (pytest-xdist#1386: pytest 9.2) would spread a shared server's tests over both workers,
    each launching its own."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        pytest.skip("not under pytest-xdist (the README's test command runs it with -n 2)")
    assert request.node.nodeid.endswith("@" + xdist_group(request.node))


def test_a_server_fixture_names_the_group_and_a_module_is_its_own() -> None:
    class Item:
        path = __file__

        def __init__(self, fixtures: tuple[str, ...], marker: str | None = None) -> None:
            self.fixturenames, self.marker = fixtures, marker

        def get_closest_marker(self, name: str) -> object | None:
            return name if name == self.marker else None

    assert xdist_group(Item(("tmp_path", "draft_server"))) == "reference-servers"
    assert xdist_group(Item(("vllm_server",))) == xdist_group(Item((), marker="vllm")) == "vllm"
    assert xdist_group(Item(("tmp_path",))) == "tests/unit/test_suite_groups.py"
