"""Engine adapters by name: the one place that knows which engines exist."""

from __future__ import annotations

from specexp.config import Config
from specexp.engines.base import Engine
from specexp.engines.torch import TorchEngine

ENGINES: dict[str, type[Engine]] = {e.name: e for e in (TorchEngine,)}


def adapter(cfg: Config) -> Engine:
    return ENGINES[cfg.engine.name]()
