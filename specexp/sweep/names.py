"""What a sweep's runs are called in MLflow: each point by the settings that tell it apart from the
other points of its sweep (``drafter=tiny batch=16``), so a run list reads without opening runs."""

from __future__ import annotations

from collections.abc import Sequence


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
