"""drafter.schedule: ranges or a schedule.json, validated at composition with one line naming the key."""

import json

import pytest

from specexp.config import ConfigError
from specexp.depth_schedule import Schedule


def test_ranges_compose_and_set_the_depth_cap(make_config) -> None:
    cfg = make_config("drafter=tiny", "batch=16", "drafter.schedule=[[1,4,5],[5,16,2]]")
    assert cfg.drafter.schedule == [[1, 4, 5], [5, 16, 2]]
    assert cfg.drafter.num_steps == 5 and cfg.drafter.draft_tokens == 6
    schedule = cfg.drafter.depth_schedule
    assert [schedule.depth(b) for b in (1, 4, 5, 16, 40)] == [5, 5, 2, 2, 2]
    assert schedule.depths == [2, 5]
    assert schedule.override() == "drafter.schedule=[[1,4,5],[5,16,2]]"


def test_a_schedule_json_path_is_read_into_its_ranges(make_config, tmp_path) -> None:
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps({"schedule": [[1, 2, 3], [3, 8, 0]], "made": "by hand"}))
    cfg = make_config("drafter=tiny", "batch=8", f"drafter.schedule={path}")
    assert cfg.drafter.schedule == [[1, 2, 3], [3, 8, 0]] and cfg.drafter.num_steps == 3


@pytest.mark.parametrize(
    ("schedule", "problem"),
    [
        ("[[2,16,3]]", "the first range starts at batch 2, not 1"),
        ("[[1,4,3],[6,16,2]]", "a gap after batch 4"),
        ("[[1,4,3],[4,16,2]]", "an overlap after batch 4"),
        ("[[1,4,3],[5,3,2]]", "ends before it starts"),
        ("[[1,16,-1]]", "negative depth"),
        ("[[1,16]]", "is not [batch_from, batch_to, num_steps]"),
        ("[[1,16,0]]", "never drafts"),
        ("/nonexistent/schedule.json", "cannot read /nonexistent/schedule.json"),
        ("[[1,4,3]]", "it ends at batch 4 but the server admits 16 running requests"),
    ],
)
def test_bad_schedules_fail_in_one_line_naming_the_key(make_config, schedule, problem) -> None:
    with pytest.raises(ConfigError) as err:
        make_config("drafter=tiny", "batch=16", f"drafter.schedule={schedule}")
    assert err.value.key == "drafter.schedule"
    assert problem in str(err.value) and "Fix:" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_schedule_without_speculation_is_refused(make_config) -> None:
    with pytest.raises(ConfigError, match="does not speculate") as err:
        make_config("drafter=none", "drafter.schedule=[[1,1,2]]")
    assert err.value.key == "drafter.schedule"


def test_a_bad_json_file_names_itself(tmp_path) -> None:
    path = tmp_path / "schedule.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="is not JSON"):
        Schedule.parse(str(path))


def test_sglang_buckets_pin_one_depth_per_range() -> None:
    schedule = Schedule.parse([[1, 4, 5], [5, 16, 2]])
    assert schedule.sglang_adaptive() == {"1": {"candidate_steps": [5]}, "5": {"candidate_steps": [2]}}
