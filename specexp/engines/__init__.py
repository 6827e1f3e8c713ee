"""Engine adapters by name: the one place that knows which engines exist."""

from __future__ import annotations

from specexp.config import Config
from specexp.engines.base import Engine
from specexp.engines.external import ExternalEngine
from specexp.engines.sglang import SglangEngine
from specexp.engines.torch import TorchEngine
from specexp.engines.vllm import VllmEngine

ENGINES: dict[str, type[Engine]] = {e.name: e for e in (TorchEngine, VllmEngine, SglangEngine, ExternalEngine)}


def adapter(cfg: Config) -> Engine:
    return ENGINES[cfg.engine.name].for_config(cfg)
