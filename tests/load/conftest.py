"""The live reference servers of tests/reference, for the client's tests against a real engine."""

from tests.reference.conftest import draft_server, plain_server, tiny  # noqa: F401
