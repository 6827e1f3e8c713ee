"""Dataclass schemas for every config group, registered in Hydra's ConfigStore (specexp.configstore).

Every invalid combination fails here, before any server starts, with a ConfigError that names the
key and the fix. One module per group of groups: errors, engine (engine, model, drafter, nccl),
workload, measure (load, slo, measure, tracking), root (Config: the rules across groups) and
sweeper (hydra.sweeper's keys). Engine-specific rules live on each engine's config class (``check``),
which the root ``Config`` calls once all groups are composed. ``from specexp.config import X`` stays
the way to import any of them.
"""

from specexp.config.engine import (
    DISTRIBUTED_ENV,
    MODEL_BUILDS,
    SPEC_METHODS,
    DrafterConfig,
    EngineConfig,
    ModelConfig,
    NcclConfig,
)
from specexp.config.errors import ConfigError
from specexp.config.measure import ARMS, LOAD_KINDS, LoadConfig, MeasureConfig, SloConfig, TrackingConfig
from specexp.config.root import Config
from specexp.config.sweeper import CrossoverConf, SweeperConf, TuneConf
from specexp.config.workload import (
    APIS,
    FILE_KINDS,
    SHAREGPT_FILE,
    WORKLOAD_KINDS,
    WorkloadConfig,
    length_bucket,
    packaged_sharegpt,
)

__all__ = [
    "APIS",
    "ARMS",
    "DISTRIBUTED_ENV",
    "FILE_KINDS",
    "LOAD_KINDS",
    "MODEL_BUILDS",
    "SHAREGPT_FILE",
    "SPEC_METHODS",
    "WORKLOAD_KINDS",
    "Config",
    "ConfigError",
    "CrossoverConf",
    "DrafterConfig",
    "EngineConfig",
    "LoadConfig",
    "MeasureConfig",
    "ModelConfig",
    "NcclConfig",
    "SloConfig",
    "SweeperConf",
    "TrackingConfig",
    "TuneConf",
    "WorkloadConfig",
    "length_bucket",
    "packaged_sharegpt",
]
