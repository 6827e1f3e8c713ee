"""Which of a break-even search's batches may be believed: the search steers by them and the map
draws them (specexp.sweep.crossover, specexp.report.crossover_map); the others are set aside, the
way the verdict sets a point aside, and said so.

A batch is set aside when one of its arms failed (no speedup to read), when a cap stopped one of
its arms before ``measure.windows`` windows (``windows_settled`` 0: its interval is not what the
search asked for), or when its speedup breaks the curve (crossing.breaks_trend, the verdict's flag).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from specexp.metrics.stats import Estimate
from specexp.report.breakeven import batch_speedups
from specexp.report.crossing import breaks_trend, crossover, crossover_interval
from specexp.result import PointResult

INPUT_LEN = "workload.input_len"  # random prompts' context length
BUCKET = "workload.length_bucket"  # a dataset's
FAILED = "failed"
UNSETTLED = "unsettled"
BREAKS = "breaks the curve"
WHY = {
    FAILED: "an arm failed (summary.csv)",
    UNSETTLED: "a cap stopped an arm before measure.windows windows (raise measure.max_s)",
    BREAKS: "its speedup breaks the curve, as the verdict flags it",
}


@dataclass
class Believed:
    """One setting's batches: the speedups that may steer the search (``points``, the curve-breakers
    still among them: the search's rule sets those aside itself) and the batches set aside with why."""

    points: dict[int, Estimate]
    aside: dict[int, str] = field(default_factory=dict)  # batch -> FAILED | UNSETTLED | BREAKS

    @property
    def settled(self) -> dict[int, Estimate]:
        """The points the map draws as measured and reads the break-even from."""
        return {b: e for b, e in self.points.items() if b not in self.aside}

    @property
    def measured(self) -> list[int]:
        """Every batch measured, set aside or not."""
        return sorted({*self.points, *self.aside})

    def words(self) -> str:
        """``set aside: batch 12 (why), ...``; empty when none is."""
        if not self.aside:
            return ""
        return "set aside: " + ", ".join(f"batch {b} ({WHY[why]})" for b, why in sorted(self.aside.items()))


def believed(rows: Sequence[PointResult], batch_min: int = 1, batch_max: int | None = None) -> Believed:
    """One setting's rows (both arms, any batch) -> its speedups inside [batch_min, batch_max] and
    the batches set aside. A batch measured again after it failed (resume) counts as measured."""

    def inside(b: int) -> bool:
        return batch_min <= b <= (batch_max if batch_max is not None else b)

    speedups = {b: e for b, e in batch_speedups(rows).items() if inside(b)}
    aside: dict[int, str] = {}
    for row in rows:
        if not inside(row.batch):
            continue
        if row.status not in ("ok", "dry_run") and row.batch not in speedups:
            aside[row.batch] = FAILED
        elif row.ok and not row.metrics.get("windows_settled", 1):
            aside.setdefault(row.batch, UNSETTLED)
    points = {b: e for b, e in speedups.items() if aside.get(b) != UNSETTLED}
    aside |= {b: BREAKS for b in breaks_trend(points)}
    return Believed(points, dict(sorted(aside.items())))


def context_of(row: PointResult) -> str | None:
    """The context length a row was measured at, as crossover.input_lens names it: a dataset's
    length bucket (``128-512``), or random prompts' token count (``64``); None for a dataset's
    prompts taken whatever their length."""
    bucket = row.params.get(BUCKET)
    if bucket not in (None, "", "None"):  # read back from MLflow, a null is the string "None"
        return str(bucket)
    if row.params.get("workload.kind", "random") == "random" and INPUT_LEN in row.params:
        return str(int(row.params[INPUT_LEN]))
    return None


def context_order(label: str) -> int:
    """Where a context length sorts: a bucket by its lower bound."""
    return int(label.split("-", 1)[0])


def believed_map(rows: Sequence[PointResult]) -> dict[str, Believed]:
    """Context length (context_of) -> its batches (``believed``), shortest first; lengths without a
    settled speedup are left out."""
    lengths = sorted({n for r in rows if (n := context_of(r)) is not None}, key=context_order)
    found = {n: believed([r for r in rows if context_of(r) == n]) for n in lengths}
    return {n: b for n, b in found.items() if b.settled}


def break_even(points: dict[int, Estimate]) -> tuple[float | None, float, float]:
    """A context length's break-even from its settled speedups, as the verdict reads one: the
    interpolated crossing (crossing.crossover; None when it never falls below 1 or is below from
    the first batch on) and its 95% interval (crossing.crossover_interval)."""
    point = crossover([(b, e.value) for b, e in sorted(points.items())])
    lo, hi = crossover_interval(points) if any(e.known for e in points.values()) else (-math.inf, math.inf)
    return point, lo, hi
