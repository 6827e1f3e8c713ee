"""Helpers the test packages share: ports, polling, real MLflow servers and stores, in-process runs."""
