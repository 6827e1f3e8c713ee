"""What a losing drafter would need: an ordinary sweep's verdict reads the required-acceptance map that
the newest ``+sweep=required_acceptance`` under the same outputs folder stored
(``<outputs>/multirun/*/required_acceptance.json`` beside its CSV) for the same engine, model and
hardware (required.Setting), and says, at each batch where a drafter loses or cannot tell, the
acceptance length it would need there. A map for another setting is never used, and one that lacks
the drafter's depth or batch is not stretched to it: the line says what the map lacks instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specexp.report.required import CSV, VALIDITY, Placed, Required, Setting, alpha_of, placed, read_csv, speedup_words
from specexp.result import PointResult


@dataclass
class StoredMap:
    """A map a sweep folder holds: what it is valid for, which sweep measured it and when."""

    setting: Setting
    sweep_id: str
    written: str  # ISO time the map was written
    found: list[Required]

    def source(self) -> str:
        return f"map: {self.sweep_id}, {self.written[:10]}"


def stored_maps(outputs: Path) -> list[StoredMap]:
    """Every readable map under ``<outputs>/multirun``, newest first (one half written is skipped)."""
    maps = []
    for path in (outputs / "multirun").glob(f"*/{VALIDITY}"):
        try:
            record = json.loads(path.read_text())
            setting = Setting(record["engine"], record["model"], record["hardware"])
            maps.append(StoredMap(setting, record["sweep_id"], record["written"], read_csv(path.parent / CSV)))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return sorted(maps, key=lambda m: m.written, reverse=True)


def _needs(req: Required) -> str:
    if req.alpha_star == math.inf:
        return f"would not break even at any α up to {req.top:.2f}"
    if req.alpha_star == -math.inf:
        return f"would break even at any α from {req.bottom:.2f}"
    return f"would need α* {req.words().removeprefix('needs α* ')}"


def need_line(p: Placed, stored: StoredMap) -> str:
    """``at batch 4 tiny loses (speedup 0.83 [0.82, 0.84]): it would need α* 3.00 [2.95, 3.06] (it
    has α 2.50; map: <sweep id>, <date>)``, or what the map lacks at the drafter's batch and depth."""
    assert p.speedup is not None
    how = "loses" if p.speedup.hi < 1 else "cannot tell whether it pays"
    at = f"at batch {p.batch} {p.drafter} {how} (speedup {speedup_words(p.speedup)})"
    req = next((r for r in stored.found if (r.batch, r.depth) == (p.batch, p.depth)), None)
    if req is not None:
        return f"{at}: it {_needs(req)} (it has α {p.alpha:.2f}; {stored.source()})"
    depths = sorted({r.depth for r in stored.found})
    if p.depth not in depths:
        lacks = f"no depth {p.depth} (only depth {', '.join(map(str, depths))})"
    else:
        batches = ", ".join(str(r.batch) for r in stored.found if r.depth == p.depth)
        lacks = f"no batch {p.batch} at depth {p.depth} (only batch {batches})"
    return f"{at}: the required-acceptance map has {lacks}; {stored.source()}"


def lines(rows: Sequence[PointResult], outputs: Path | None = None) -> list[str]:
    """The verdict's lines for an ordinary sweep's drafters that lose or cannot tell, from the newest
    stored map for their setting; where maps exist but none for that setting, one line says so; none
    where no map exists, none loses, or ``rows`` are a map themselves (their table places them)."""
    if not rows or any(alpha_of(r) is not None for r in rows):
        return []
    losing = [p for p in placed(rows) if p.category is None and p.speedup is not None and not p.speedup.lo > 1]
    root = outputs or Path(str(rows[0].params.get("outputs", "outputs")))
    maps = stored_maps(root) if losing else []
    if not maps:
        return []
    out: list[str] = []
    unmatched: dict[Setting, None] = {}  # in order, once each
    for p in losing:
        stored = next((m for m in maps if m.setting.hardware is not None and m.setting == p.setting), None)
        if stored is None:
            unmatched[p.setting] = None
        else:
            out.append(need_line(p, stored))
    others = "; ".join(f"{m.sweep_id}: {m.setting.words()}" for m in maps[:3])
    out += [
        f"no required-acceptance map for {s.words()} under {root / 'multirun'}: the {len(maps)} there are for "
        f"other settings ({others}{'; ...' if len(maps) > 3 else ''})"
        for s in unmatched
    ]
    return out
