"""Shared fixtures: the repo's paths and a composed-config helper over the real conf/."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from specexp.config import Config
from specexp.configstore import CONF_DIR, load, register

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

register()


@pytest.fixture
def make_config() -> Callable[..., Config]:
    """Compose conf/ with overrides exactly as the app does, and validate it."""

    def make(*overrides: str) -> Config:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return load(compose("config", overrides=list(overrides)))

    return make
