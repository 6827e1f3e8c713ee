"""Hydra's own lines (issue 38, item 4): "Launching 1 jobs locally" for each server group of a sweep
says nothing the live lines do not, so it is kept quiet; ``hydra.verbose=hydra`` shows it again.
Hydra's own logging set-up is run on conf/'s composed config (what the app's sweep does before and
between its jobs), and the launcher's logger asked whether it would print."""

from __future__ import annotations

import logging

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.utils import configure_log

from tests.conftest import CONF_DIR
from tests.support.inprocess import logging_state, restore_logging

LAUNCHER = "hydra._internal.core_plugins.basic_launcher"  # "Launching N jobs locally", at INFO


@pytest.mark.parametrize("stage", ["hydra_logging", "job_logging"])
def test_hydras_launch_lines_are_quiet_unless_asked_for(stage: str) -> None:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            "config", overrides=["hydra.job_logging.handlers.file.filename=/dev/null"], return_hydra_config=True
        )
    before = logging_state()
    try:
        configure_log(cfg.hydra[stage], False)
        assert not logging.getLogger(LAUNCHER).isEnabledFor(logging.INFO)
        assert logging.getLogger("specexp").isEnabledFor(logging.INFO)  # specexp's own lines stay
        configure_log(cfg.hydra[stage], "hydra")  # hydra.verbose=hydra
        assert logging.getLogger(LAUNCHER).isEnabledFor(logging.INFO)
    finally:
        restore_logging(before)


def test_a_jobs_log_file_is_made_at_its_first_line(tmp_path) -> None:
    """issue 37: every sweep left a 0-byte groups/0/app.log, the job log nothing wrote to (and Hydra kept
    open under the basic launcher): the file handler opens it when a line comes, never before."""
    log = tmp_path / "app.log"
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"hydra.job_logging.handlers.file.filename={log}"], return_hydra_config=True)
    assert cfg.hydra.job_logging.handlers.file.delay is True
    assert list(cfg.hydra.job_logging.root.handlers) == ["console", "file"]  # Hydra's own handlers kept
    before = logging_state()
    try:
        configure_log(cfg.hydra.job_logging, False)
        assert not log.exists()
        logging.getLogger("specexp").warning("a line")
        assert "a line" in log.read_text()
    finally:
        for handler in logging.getLogger().handlers:
            handler.close()
        restore_logging(before)
