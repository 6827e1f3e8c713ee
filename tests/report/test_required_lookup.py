"""An ordinary sweep's verdict reads the required-acceptance map a +sweep=required_acceptance stored
under the same outputs folder: only one measured on the same engine, model and hardware, at the
drafter's own depth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specexp.report.__main__ import report
from specexp.report.fetch import Sweep
from specexp.report.required import HARDWARE_TAG, SYNTHETIC_TAG, VALIDITY, write
from specexp.result import PointResult
from tests.report.test_required import map_rows

MACHINE = "Xeon (16 cores); 1x NVIDIA H200"


def on(rows: list[PointResult], sweep: str, engine: str = "torch", model: str = "tiny", hw: str = MACHINE) -> list:
    """``rows`` as measured by ``engine`` on ``model`` and the machine ``hw``, in sweep ``sweep``."""
    for r in rows:
        r.engine, r.model = engine, model
        r.params |= {"engine.device": "cpu"}
        r.tags |= {HARDWARE_TAG: hw, "specexp.sweep_id": sweep}
    return rows


def stored(outputs: Path, sweep: str, **setting: str) -> Path:
    """A map sweep's folder under ``outputs``, its map written as the sweep's summary writes it."""
    folder = outputs / "multirun" / sweep
    write(on(map_rows(), sweep, **setting), folder, plots=False)
    return folder


def ordinary(outputs: Path, depth: int = 4) -> list[PointResult]:
    """A sweep under ``outputs`` of tiny and drafter=none alone (no synthetic point): tiny, at α 2.5,
    pays at batch 1 only."""
    rows = [r for r in map_rows() if SYNTHETIC_TAG not in r.tags]
    for r in rows:
        r.params |= {"drafter.num_steps": depth if r.speculative else 0, "outputs": str(outputs)}
    return on(rows, "ordinary")


def test_the_verdict_says_what_a_losing_drafter_would_need_from_the_matching_map(tmp_path: Path) -> None:
    folder = stored(tmp_path, "map-b")
    assert json.loads((folder / VALIDITY).read_text()) | {"written": "x"} == {
        "engine": "torch on cpu",
        "model": "tiny",
        "hardware": MACHINE,
        "sweep_id": "map-b",
        "written": "x",
        "depths": [4],
    }
    stale = stored(tmp_path, "map-a")  # older: the newest matching map is read
    record = json.loads((stale / VALIDITY).read_text()) | {"written": "2020-01-01T00:00:00"}
    (stale / VALIDITY).write_text(json.dumps(record))
    text = report(Sweep("ordinary", "p", "sweep-ordinary", ordinary(tmp_path)), tmp_path / "report", plots=False)
    day = json.loads((folder / VALIDITY).read_text())["written"][:10]
    lines = [line.removeprefix("- ") for line in text.splitlines() if "would need" in line]
    assert len(lines) == 2 and "at batch 1" not in text.split("would need")[0]  # batch 1 pays: nothing to say
    assert lines[0].startswith("at batch 4 tiny loses (speedup 0.83 [")
    assert lines[0].endswith(f"]): it would need α* 3.00 [2.97, 3.04] (it has α 2.50; map: map-b, {day})")
    assert "at batch 16 tiny loses" in lines[1] and "would need α* 4.00 [" in lines[1]


@pytest.mark.parametrize("other", [{"engine": "vllm"}, {"model": "llama"}, {"hw": "Xeon (2 cores); no GPU"}])
def test_a_map_for_another_engine_model_or_machine_is_never_used(tmp_path: Path, other: dict[str, str]) -> None:
    stored(tmp_path, "map-other", **other)
    text = report(Sweep("ordinary", "p", "sweep-ordinary", ordinary(tmp_path)), tmp_path / "report", plots=False)
    assert "would need" not in text
    assert f"no required-acceptance map for torch on cpu, model tiny, {MACHINE} under {tmp_path / 'multirun'}" in text
    assert "the 1 there are for other settings (map-other: " in text


def test_without_any_map_the_verdict_is_silent(tmp_path: Path) -> None:
    text = report(Sweep("ordinary", "p", "sweep-ordinary", ordinary(tmp_path)), tmp_path / "report", plots=False)
    assert "required-acceptance" not in text and "would need" not in text


def test_a_map_without_the_drafters_depth_says_so_rather_than_use_another(tmp_path: Path) -> None:
    stored(tmp_path, "map-k4")
    rows = ordinary(tmp_path, depth=2)
    text = report(Sweep("ordinary", "p", "sweep-ordinary", rows), tmp_path / "report", plots=False)
    assert "would need" not in text
    assert "at batch 4 tiny loses (speedup 0.83 [" in text
    assert "]): the required-acceptance map has no depth 2 (only depth 4); map: map-k4, " in text
