"""Registers the schemas and the sweep presets in Hydra's ConfigStore; turns a composed config into
a validated ``Config``.

YAML in conf/ names its schema (``defaults: [/schema/drafter@_here_, _self_]``), so a typo'd key or a
wrong type fails at composition; the dataclasses' ``__post_init__`` then check combinations. Schemas
live in their own ``schema`` tree, not in the groups they type: ``drafter=drafter_schema`` would
otherwise be an option (offered by Hydra's own error listing) that composes to no drafter at all.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import time
import uuid
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from specexp.config import (
    Config,
    ConfigError,
    DrafterConfig,
    LoadConfig,
    ModelConfig,
    NcclConfig,
    SweeperConf,
    TrackingConfig,
    WorkloadConfig,
)
from specexp.context import RUN_NODE, RunContext
from specexp.engines import ENGINES

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """conf/ or sweeps/: beside the package in a checkout, inside it (``_name``) in a wheel."""
    checkout = _PACKAGE.parent / name
    return checkout if checkout.is_dir() else _PACKAGE / f"_{name}"


CONF_DIR = resource_dir("conf")
SWEEPS_DIR = resource_dir("sweeps")


@functools.cache
def run_id() -> str:
    """This process's run or sweep id: its start time and a random suffix (``${specexp.run_id:}``)."""
    return f"{time.strftime('%Y-%m-%d_%H-%M-%S')}-{uuid.uuid4().hex[:6]}"


def register() -> None:
    if not OmegaConf.has_resolver("specexp.run_id"):
        OmegaConf.register_new_resolver("specexp.run_id", run_id, use_cache=True)
    cs = ConfigStore.instance()
    cs.store(group="hydra/sweeper", name="specexp", node=SweeperConf, provider="specexp")
    cs.store(group="schema", name="config", node=Config)
    for engine in ENGINES.values():
        cs.store(group="schema/engine", name=engine.name, node=engine.config_class)
    for group, node in (
        ("model", ModelConfig),
        ("drafter", DrafterConfig),
        ("nccl", NcclConfig),
        ("workload", WorkloadConfig),
        ("tracking", TrackingConfig),
        ("load", LoadConfig),
    ):
        cs.store(group="schema", name=group, node=node)
    # `+sweep=NAME` loads sweeps/NAME.yaml at the root, so a preset may set any key, hydra's included.
    for path in sorted(SWEEPS_DIR.glob("*.yaml")):
        cs.store(group="sweep", name=path.stem, node=OmegaConf.load(path), package="_global_")


def to_job(raw: DictConfig) -> tuple[Config, RunContext]:
    """A job's validated config and its run-time context (what its sweeper decided, in the ``run``
    node; the defaults for a single run), each built once."""
    cfg = to_config(raw)
    decided = raw.get(RUN_NODE)
    return cfg, RunContext.of(cfg, OmegaConf.to_container(decided) if decided is not None else None)  # type: ignore[arg-type]


def to_config(cfg: DictConfig) -> Config:
    """The validated dataclass tree for a composed config (its ``hydra`` node and a sweeper's ``run``
    node, which are not the user's settings, dropped)."""
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.pop("hydra", None)
        cfg.pop(RUN_NODE, None)
    try:
        config = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "config"
        raise ConfigError(str(key), str(exc).splitlines()[0], "check the value against conf/ and `--cfg job`") from exc
    undeclared(cfg, config)
    return config  # type: ignore[return-value]


def undeclared(raw: DictConfig, node: Any, prefix: str = "") -> None:
    """A key the schemas do not declare (``+workload.num_promts=8``: a typo Hydra's own hint leads
    to) would be ignored: ConfigError naming the nearest declared key instead."""
    if not dataclasses.is_dataclass(node):
        return
    names = [f.name for f in dataclasses.fields(node)]
    for key in raw:
        if key not in names:
            near = difflib.get_close_matches(str(key), names, n=1)
            fix = f"did you mean {prefix}{near[0]}?" if near else f"one of {', '.join(prefix + n for n in names)}"
            raise ConfigError(f"{prefix}{key}", "no such setting", fix)
        value = getattr(node, str(key))
        if dataclasses.is_dataclass(value) and isinstance(raw[key], DictConfig):
            undeclared(raw[key], value, f"{prefix}{key}.")
