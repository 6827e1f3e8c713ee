"""What a sweep's runs are called in MLflow: each point by the settings that tell it apart from the
other points of its sweep (``drafter=tiny batch=16``), the sweep by what it swept
(``torch/tiny: drafter none,tiny × batch 1–16``), so a run list reads without opening runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from omegaconf import OmegaConf

from specexp.config import Config
from specexp.point.plan import flat_params


def _key_value(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


def axes(jobs: Sequence[Sequence[str]]) -> list[str]:
    """The override keys whose values differ between jobs (or that some jobs lack), in the order
    they first appear, batch last (the axis every plot runs along)."""
    parsed = [dict(_key_value(o) for o in job) for job in jobs]
    keys = dict.fromkeys(key for job in parsed for key in job)
    return sorted((key for key in keys if len({job.get(key) for job in parsed}) > 1), key=lambda k: k == "batch")


def point_names(jobs: Sequence[Sequence[str]], keys: Sequence[str]) -> list[str]:
    """``key=value`` for each of ``keys`` a job sets, joined by spaces; one name per job."""
    names = []
    for job in jobs:
        settings = dict(_key_value(o) for o in job)
        names.append(" ".join(f"{k}={settings[k]}" for k in keys if k in settings))
    return names


def override(key: str, value: str) -> str:
    """``key='value'`` quoted for Hydra's override parser: spaces, ``=``, ``,`` and ``${`` stay literal."""
    escaped = value.replace("'", "\\'").replace("${", "\\${")
    return f"{key}='{escaped}'"


def swept(jobs: Sequence[Sequence[str]]) -> dict[str, str]:
    """Each axis with its values exactly, comma-separated in order of first appearance (the parent
    run's ``swept.<axis>`` params: ``1,4,8,16``, never a range that hides which were measured)."""
    out = {}
    for key in axes(jobs):
        out[key] = ",".join(dict.fromkeys(v for job in jobs for k, v in map(_key_value, job) if k == key))
    return out


def short(values: str) -> str:
    """An axis's values for a name: ``1–16`` for three or more whole numbers, else as they are."""
    items = values.split(",")
    if len(items) > 2 and all(v.lstrip("-").isdigit() for v in items):
        return f"{min(map(int, items))}–{max(map(int, items))}"
    return values


def sweep_name(cfg: Config, what: Mapping[str, str]) -> str:
    """``torch/tiny: drafter none,tiny × batch 1–16``: the engine and model (unless swept), then each
    swept axis with its values."""
    fixed = [name for key, name in (("engine", cfg.engine.name), ("model", cfg.model.name)) if key not in what]
    axes_text = (
        " × ".join(f"{k} {short(v)}" for k, v in what.items()) or f"drafter {cfg.drafter.name} × batch {cfg.batch}"
    )
    return f"{'/'.join(fixed)}: {axes_text}" if fixed else axes_text


# Settings every point of a sweep has its own value for: not the sweep's configuration.
_PER_POINT = ("sweep_id", "run_name", "max_batch")


def sweep_params(cfg: Config, what: Mapping[str, str]) -> dict[str, str]:
    """The parent run's params: ``swept.<axis>`` for each swept axis, and every setting of ``cfg``
    that no axis changes (the fixed configuration)."""
    fixed = {
        k: str(v)
        for k, v in flat_params(OmegaConf.structured(cfg)).items()
        if k not in _PER_POINT and not any(k == a or k.startswith(f"{a}.") for a in what)
    }
    return {**{f"swept.{k}": v for k, v in what.items()}, **fixed}
