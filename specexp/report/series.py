"""Series of points (same settings, different load: batch or request rate) and readable labels for them.

Plots, tables and sweep comparisons all need to say which points belong together and to name
them by what tells them apart, not by every setting.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from specexp.report.analysis import AXIS_PARAMS, identity, x_of
from specexp.result import PointResult

Settings = tuple[tuple[str, str], ...]
_HEAD = ("engine.name", "drafter.name")


def settings(row: PointResult, drop: Iterable[str] = ()) -> Settings:
    """Every setting that makes the point a different experiment (drafter included), minus ``drop``."""
    drop = tuple(drop)
    drafter = tuple((k, str(v)) for k, v in row.params.items() if k.startswith("drafter.") and k not in drop)
    return tuple(sorted(identity(row, drop) + drafter))


def series_key(row: PointResult, drop: Iterable[str] = ()) -> Settings:
    return settings(row, (*AXIS_PARAMS, *drop))


def labels(keys: Iterable[Settings]) -> dict[Settings, str]:
    """``engine/drafter`` plus ``key=value`` for each setting that tells the series apart.

    A namespaced setting (``drafter.num_steps``) is shown only where it differs between series of the
    same ``drafter.name``: a baseline's ``num_steps=0`` next to a drafter's 4 says nothing new.
    """
    unique = list(dict.fromkeys(keys))
    found = [dict(k) for k in unique]
    names = sorted(set().union(*found)) if found else []

    def peers(d: dict[str, str], key: str) -> list[dict[str, str]]:
        group = f"{key.split('.', 1)[0]}.name"
        if "." not in key or key == group:
            return found
        return [o for o in found if o.get(group) == d.get(group)]

    out = {}
    for key, d in zip(unique, found, strict=True):
        shown = [k for k in names if k not in _HEAD and len({o.get(k) for o in peers(d, k)}) > 1]
        head = "/".join(d.get(k, "none") for k in _HEAD)
        extra = " ".join(f"{k.removesuffix('.name')}={d.get(k, '-')}" for k in shown)
        out[key] = f"{head} {extra}".strip()
    return out


def group(rows: Sequence[PointResult]) -> dict[str, list[PointResult]]:
    """The ok points by series label, each series sorted along its load axis."""
    ok = [r for r in rows if r.ok]
    names = labels(series_key(r) for r in ok)
    out: dict[str, list[PointResult]] = {}
    for row in sorted(ok, key=x_of):
        out.setdefault(names[series_key(row)], []).append(row)
    return out
