"""What the machine was doing at each place of a series: the load client's CPU share and the host's
load per core, which the verdict names beside an answer they may have bent."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from specexp.load.host import CLIENT_CPU_WARNING
from specexp.result import PointResult


def client_bound(rows: Sequence[PointResult], x_of: Callable[[PointResult], float]) -> dict[float, float]:
    """Places at which the load client used at least CLIENT_CPU_WARNING of a core (speculative or
    baseline point, any launch, placed by ``x_of``), with the largest share seen."""
    out: dict[float, float] = {}
    for row in rows:
        share = row.metrics.get("client_cpu", 0.0)
        if share >= CLIENT_CPU_WARNING:
            out[x_of(row)] = max(share, out.get(x_of(row), 0.0))
    return dict(sorted(out.items()))


def host_load(rows: Sequence[PointResult], x_of: Callable[[PointResult], float]) -> dict[float, float]:
    """Per place, the highest 1-minute load average per core seen by its points (any arm or launch)."""
    out: dict[float, float] = {}
    for row in rows:
        if (load := row.metrics.get("host_load1")) is not None:
            per_core = load / float(row.tags.get("specexp.host_cpus") or 1)
            out[x_of(row)] = max(per_core, out.get(x_of(row), 0.0))
    return dict(sorted(out.items()))
