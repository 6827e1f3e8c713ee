"""A changing load judged per phase, on synthetic records: each phase's rates, running requests,
goodput (with its interval), latencies and acceptance; each arm's regret against the per-phase best;
and the sweep folder's phases.csv, regret.csv, verdict lines and timeline."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from specexp.config import SloConfig
from specexp.records import Chunk, RequestRecord
from specexp.report import changing_load, regret
from specexp.report.phases import phase_metrics, place

T0 = 100.0  # the window's start on the monotonic clock
EDGES = [0.0, 2.0, 4.0]


def record(index: int, at: float, ttft: float, tokens: int, tpot: float, **extra: object) -> RequestRecord:
    """A request arriving ``at`` s into window 0, sent at once, its tokens one chunk each."""
    send = T0 + at
    chunks = [Chunk(send + ttft + k * tpot, 1) for k in range(tokens)]
    return RequestRecord(
        index=index,
        send=send,
        arrival=send,
        end=chunks[-1].t,
        chunks=chunks,
        completion_tokens=tokens,
        finish_reason="length",
        window=0,
        extra={"arrival_s": at, **extra},
    )


def test_phase_metrics_of_known_requests() -> None:
    spec = {"spec_verify_ct": 4, "spec_num_correct_drafts": 6, "spec_num_proposed_drafts": 12}
    records = [
        record(0, 0.5, 0.1, 5, 0.1, **spec),  # runs 0.5-1.0, meets ttft 200 ms and tpot 150 ms
        record(1, 1.0, 0.5, 5, 0.1, **spec),  # ttft 500 ms: misses; runs 1.0-1.9
        record(2, 2.5, 0.1, 3, 0.2, output_asked=8),  # tpot 200 ms: misses; 3 tokens of 8 asked
        RequestRecord(
            index=3, send=T0 + 3.0, arrival=T0 + 3.0, end=T0 + 3.0, error="HTTP 500", window=0, extra={"arrival_s": 3.0}
        ),
        RequestRecord(index=4, send=T0, warmup=True, window=0, extra={"arrival_s": 0.0}),  # left out
    ]
    rows = phase_metrics(place(records, EDGES), EDGES, SloConfig(ttft_ms=200, tpot_ms=150))
    first, second = rows
    assert (first["requests"], second["requests"]) == (2, 2)
    assert first["offered"] == pytest.approx(1.0) and first["achieved"] == pytest.approx(1.0)
    assert first["running"] == pytest.approx((0.5 + 0.9) / 2)
    assert first["goodput"] == pytest.approx(0.5) and first["goodput_lo"] < 0.5 < first["goodput_hi"] <= 1.0
    assert first["ttft_p50_ms"] == pytest.approx(300) and first["tpot_p90_ms"] == pytest.approx(100)
    assert first["output_throughput"] == pytest.approx(5.0)  # 10 tokens in 2 s
    assert first["accept_length"] == pytest.approx(1 + 12 / 8) and first["depth_drafted"] == pytest.approx(3.0)
    assert second["goodput"] == 0.0 and second["goodput_lo"] == 0.0 and second["achieved"] == pytest.approx(0.5)
    assert np.isnan(second["accept_length"]) and second["lengths_short"] == 1 and first["lengths_short"] == 0


def _paired(scores: dict[str, tuple[float, float]], n: int = 200) -> regret.Paired:
    # each arm's requests meet the target at its rate per phase; request i is in phase i % 2
    rng = np.random.default_rng(1)
    draws = rng.random(n)  # shared: the same request is hard or easy for every arm
    return regret.pair(
        {a: {(0, i): (i % 2, float(draws[i] < p[i % 2])) for i in range(n)} for a, p in scores.items()}, 2
    )


def test_regret_against_the_per_phase_best() -> None:
    paired = _paired({"none": (0.8, 0.2), "depth 3": (0.8, 0.6), "schedule": (1.0, 0.6)})
    assert regret.best_arms(paired) == ["schedule", "depth 3"]  # a tie goes to the first listed
    lost = {r.arm: r for r in regret.regrets(paired)}
    scores = paired.values.reshape(3, -1, 2).sum(axis=1)  # (arms, phases): request i in phase i % 2
    best = scores.max(axis=0)
    assert lost["none"].loss[-1] == pytest.approx((best - scores[0]).sum() / best.sum())
    assert lost["none"].loss[1] > 0.5 and lost["none"].low[1] <= lost["none"].loss[1] <= lost["none"].high[1]
    assert lost["none"].low[-1] > 0.2  # the baseline loses for sure in the peak
    assert lost["schedule"].loss[0] == 0.0 and lost["schedule"].low[-1] == pytest.approx(0.0)
    lines = regret.words(list(lost.values()), regret.best_arms(paired), "goodput")
    assert lines[0].startswith("best arm by goodput, phase by phase: 1: schedule; 2: depth 3")
    assert any(line.startswith("none: regret ") and "loses most in phase 2" in line for line in lines)


def test_without_targets_the_regret_is_tpot_added() -> None:
    # TPOT, lower better: depth 3 is 20% slower in phase 1, the schedule 50% slower in phase 2
    tpots = {"depth 3": (0.012, 0.020), "schedule": (0.010, 0.030)}
    values = {a: {(0, i): (i % 2, t[i % 2]) for i in range(40)} for a, t in tpots.items()}
    values["schedule"][(0, 39)] = (1, None)  # a failed request: left out for every arm
    paired = regret.pair(values, 2, higher=False)
    assert paired.values.shape == (2, 39) and regret.best_arms(paired) == ["schedule", "depth 3"]
    lost = {r.arm: r.loss for r in regret.regrets(paired)}
    assert lost["depth 3"][:2] == pytest.approx([0.2, 0.0]) and lost["schedule"][:2] == pytest.approx([0.0, 0.5])


def _point(folder: Path, drafter: dict, quality: float) -> object:
    folder.mkdir(parents=True)
    load = {"name": "profile", "kind": "rate", "profile": [[0, 1], [2, 4]], "duration_s": 4, "max_concurrency": 8}
    config = {"load": load, "slo": {"tpot_ms": 150}, "drafter": drafter, "repeat": 0}
    (folder / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(config)))
    tpots = [0.1 if k % 3 or quality > 0.5 else 0.3 for k in range(10)]
    records = [record(k, 0.4 * k, 0.05, 4, t) for k, t in enumerate(tpots)]
    (folder / "records.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in records))
    from specexp.result import PointResult

    return PointResult("ok", drafter=drafter["name"], job_dir=str(folder))


def test_the_sweep_folder_gets_phases_regret_and_a_timeline(tmp_path: Path) -> None:
    rows = [
        _point(tmp_path / "0", {"name": "none", "schedule": None, "num_steps": 0}, 0.0),
        _point(tmp_path / "1", {"name": "tiny", "schedule": [[1, 8, 2]], "num_steps": 2}, 1.0),
    ]
    files, lines = changing_load.write(tmp_path, rows)
    assert [f.name for f in files] == ["phases.csv", "regret.csv", "timeline.png"] and all(f.is_file() for f in files)
    table = list(csv.DictReader((tmp_path / "phases.csv").open()))
    assert [(r["arm"], r["phase"]) for r in table] == [
        ("none", "1"),
        ("none", "2"),
        ("tiny schedule", "1"),
        ("tiny schedule", "2"),
    ]
    for column in ("offered", "achieved", "goodput_lo", "goodput_hi", "tpot_p50_ms", "accept_length", "depth_drafted"):
        assert column in table[0]
    regrets = {(r["arm"], r["phase"]): float(r["loss"]) for r in csv.DictReader((tmp_path / "regret.csv").open())}
    assert regrets[("tiny schedule", "run")] == 0.0 and regrets[("none", "run")] == pytest.approx(0.4)
    assert lines[0].startswith("phase 1 (0-2 s, offered 2.50/s): best tiny schedule")
    assert any(line.startswith("none: regret 40.0% [") for line in lines)
    assert (tmp_path / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert changing_load.write(tmp_path, []) == ([], [])
    fixed = {"name": "tiny", "schedule": [[1, 8, 2]], "fixed_depth": 3, "num_steps": 3}
    assert changing_load.arm_label({"drafter": fixed}) == "tiny depth 3"
