"""End-to-end tests share the fixtures of tests/conftest.py (``specexp``, ``shared_outputs``)."""

from tests.conftest import FAST, engine_processes

__all__ = ["FAST", "engine_processes"]
