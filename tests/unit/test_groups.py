"""Server groups as the sweeper hands them to launcher jobs: numbered points, a manifest a job on
another node reads back, earlier attempts moved aside rather than written over."""

from __future__ import annotations

import pytest

from specexp.sweep.groups import Group, Point, form_groups
from specexp.sweep.job_plan import plan
from specexp.sweep.runner import set_aside, unmasked


def test_groups_number_their_points_on_from_where_the_sweep_is(make_config, tmp_path) -> None:
    jobs = [["dry_run=true", f"drafter={d}", f"batch={b}", "engine.gpus=1"] for d in ("none", "tiny") for b in (1, 4)]
    groups = form_groups(plan(lambda o: make_config(*o), jobs, "s"), first_point=5, first_group=2)
    assert [(g.index, [p.num for p in g.points], g.gpus) for g in groups] == [(2, [5, 6], 1), (3, [7, 8], 1)]
    assert groups[1].job_overrides()[-1] == "hydra.sweep.subdir=groups/3"  # the job's folder is the group's
    groups[1].devices = ["3"]
    groups[1].save(tmp_path)
    assert Group.load(tmp_path / "groups" / "3") == groups[1]


def test_an_earlier_attempt_is_moved_aside_never_written_over(tmp_path) -> None:
    point = tmp_path / "7"
    for attempt in ("first", "second"):
        point.mkdir()
        (point / "results.json").write_text(attempt)
        set_aside(point)
    assert not point.exists()
    assert (tmp_path / "7.attempt1" / "results.json").read_text() == "first"
    assert (tmp_path / "7.attempt2" / "results.json").read_text() == "second"


def test_a_manifest_holds_no_secret_and_the_job_restores_it_from_its_own_overrides(tmp_path) -> None:
    token = "hf_canary_0123456789"
    overrides = [f"+engine.env.HF_TOKEN={token}", "+engine.env.TOKENIZERS_PARALLELISM=false", "batch=4"]
    group = Group(0, "key", 0, [Point(0, overrides), Point(1, [*overrides[:2], "batch=8"])])
    group.save(tmp_path)
    written = (tmp_path / "groups" / "0" / "group.json").read_text()
    assert token not in written and "TOKENIZERS_PARALLELISM=false" in written
    loaded = Group.load(tmp_path / "groups" / "0")
    assert loaded.points[1].overrides[0] == "+engine.env.HF_TOKEN=***"
    own = group.job_overrides()  # what the launcher hands the job: never written to the manifest
    assert unmasked(loaded.points[1].overrides, own) == group.points[1].overrides
    with pytest.raises(ValueError, match=r"engine\.env\.HF_TOKEN: its value is masked"):
        unmasked(loaded.points[1].overrides, ["batch=4"])
