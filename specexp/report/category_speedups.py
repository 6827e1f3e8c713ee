"""Per-category speedups: each speculative point against its baseline, one prompt category at a time.

A point whose prompts carry categories has ``<key>.<category>`` metrics (specexp.metrics.categories);
every point of a sweep sends the same conversations, so a category's throughput here and at the
baseline measure the same questions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specexp.report.analysis import identity
from specexp.result import PointResult

_COUNT = "requests_ok."


@dataclass(frozen=True)
class CategoryRow:
    point: PointResult
    category: str
    requests: int
    accept_length: float | None
    accept_rate: float | None
    speedup: float | None  # output_throughput.<category> / the baseline's; None without a baseline


def categories(row: PointResult) -> list[str]:
    return sorted(k[len(_COUNT) :] for k in row.metrics if k.startswith(_COUNT))


def category_rows(rows: Sequence[PointResult]) -> list[CategoryRow]:
    """One row per speculative ok point and category, in the points' order."""
    baselines = {identity(r): r for r in rows if not r.speculative and r.ok}
    out = []
    for row in rows:
        if not (row.speculative and row.ok):
            continue
        base = baselines.get(identity(row))
        for category in categories(row):
            m = row.metrics
            mine, theirs = m.get(f"output_throughput.{category}"), None
            if base is not None:
                theirs = base.metrics.get(f"output_throughput.{category}")
            out.append(
                CategoryRow(
                    point=row,
                    category=category,
                    requests=int(m[_COUNT + category]),
                    accept_length=m.get(f"accept_length.{category}"),
                    accept_rate=m.get(f"accept_rate.{category}"),
                    speedup=mine / theirs if mine is not None and theirs else None,
                )
            )
    return out
