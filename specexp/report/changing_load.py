"""A sweep under a changing load (load.profile, or a trace at load.path) judged phase by phase: its
phases.csv (every arm's metrics per phase), regret.csv (what each arm loses against the per-phase
best), the verdict's lines and timeline.png, in the sweep folder. Read from each point's folder
(config.yaml, records.jsonl); a sweep under a constant load gets none of them."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from specexp import atomic
from specexp.config import LoadConfig, SloConfig
from specexp.load.send_plan import phases as phase_edges
from specexp.metrics.slo import meets
from specexp.records import RequestRecord
from specexp.report import regret
from specexp.report.phases import Placed, phase_metrics, place, tpot_s
from specexp.result import PointResult

PHASES = "phases.csv"
REGRET = "regret.csv"
TIMELINE = "timeline.png"


def arm_label(config: dict[str, Any]) -> str:
    """What sets an arm apart: its drafter, and a schedule or a fixed depth."""
    d = config.get("drafter") or {}
    if d.get("name", "none") == "none":
        return "none"
    if d.get("fixed_depth") is not None:  # +sweep=traffic_profile's static arm: the schedule dropped
        return f"{d['name']} depth {d['fixed_depth']}"
    return f"{d['name']} schedule" if d.get("schedule") is not None else f"{d['name']} depth {d.get('num_steps')}"


def _points(rows: Sequence[PointResult]) -> list[tuple[str, dict[str, Any], list[RequestRecord]]]:
    """(arm, config, records) of every point that ran under a changing load."""
    out = []
    for row in rows:
        folder = Path(row.job_dir) if row.job_dir else None
        if folder is None or not (folder / "config.yaml").is_file() or not (folder / "records.jsonl").is_file():
            continue
        config = OmegaConf.to_container(OmegaConf.load(folder / "config.yaml"))
        assert isinstance(config, dict)
        load = config.get("load") or {}
        if load.get("kind") == "closed" or (load.get("profile") is None and load.get("path") is None):
            continue
        lines = (folder / "records.jsonl").read_text().splitlines()
        out.append((arm_label(config), config, [RequestRecord.from_json(json.loads(x)) for x in lines if x]))
    return out


def write(sweep_dir: Path, rows: Sequence[PointResult]) -> tuple[list[Path], list[str]]:
    """Write the files (module doc) when the sweep ran under a changing load; (files, verdict lines)."""
    points = _points(rows)
    if not points:
        return [], []
    first = points[0][1]
    edges = phase_edges(LoadConfig(**first["load"]))
    slo = SloConfig(**(first.get("slo") or {}))
    placed: dict[str, list[Placed]] = {}
    for arm, config, records in points:
        placed.setdefault(arm, []).extend(place(records, edges or [], int(config.get("repeat", 0))))
    if not edges or not placed:
        return [], []

    def good(p: Placed) -> bool:
        return meets(p.record, slo) if slo.given else p.record.ok

    table = [{"arm": arm, **row} for arm, ps in placed.items() for row in phase_metrics(ps, edges, slo)]
    value = (lambda p: float(good(p))) if slo.given else (lambda p: tpot_s(p.record))
    values = {arm: {(p.replay, p.record.index): (p.phase, value(p)) for p in ps} for arm, ps in placed.items()}
    paired = regret.pair(values, len(edges) - 1, higher=slo.given)
    lost = regret.regrets(paired)
    what = "goodput under slo.*" if slo.given else "TPOT (no slo.* set; lower is better)"
    best = regret.best_arms(paired)
    lines = [*_best_lines(table, best), *regret.words(lost, best, what), f"regret intervals: {regret.METHOD}"]
    files = [sweep_dir / PHASES, sweep_dir / REGRET, sweep_dir / TIMELINE]
    with atomic.replacing(files[0]) as tmp:
        _csv(tmp, table)
    with atomic.replacing(files[1]) as tmp:
        _csv(tmp, _regret_rows(lost, len(edges) - 1))
    from specexp.report.timeline import draw  # matplotlib: only when a sweep ends

    with atomic.replacing(files[2]) as tmp:
        draw(placed, edges, good, tmp)
    return files, lines


def _best_lines(table: list[dict[str, Any]], best: Sequence[str]) -> list[str]:
    """Per phase: its offered rate, and the best arm's goodput with its interval."""
    lines = []
    for k, arm in enumerate(best):
        row = next(r for r in table if r["arm"] == arm and r["phase"] == k + 1)
        lines.append(
            f"phase {k + 1} ({row['start_s']:g}-{row['end_s']:g} s, offered {row['offered']:.2f}/s): best {arm}, "
            f"goodput {row['goodput']:.2f}/s [{row['goodput_lo']:.2f}, {row['goodput_hi']:.2f}], "
            f"TPOT p50 {row['tpot_p50_ms']:.1f} ms"
        )
    return lines


def _regret_rows(lost: Sequence[regret.Regret], phases: int) -> list[dict[str, Any]]:
    names = [*(str(k + 1) for k in range(phases)), "run"]
    return [
        {"arm": r.arm, "phase": name, "loss": r.loss[i], "loss_lo": r.low[i], "loss_hi": r.high[i]}
        for r in lost
        for i, name in enumerate(names)
    ]


def _csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in rows)
