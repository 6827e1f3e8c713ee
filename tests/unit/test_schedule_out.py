"""A measured schedule from a sweep's points: best depth per batch, ties merged, guesses said."""

import json

from specexp.config import MeasureConfig
from specexp.depth_schedule import Schedule
from specexp.metrics.window_results import aggregate
from specexp.report import schedule
from specexp.result import PointResult


def point(batch: int, depth: int, value: float, half: float | None = 1.0, windows: int = 3) -> PointResult:
    params = {"engine.name": "torch", "model.name": "tiny", "batch": batch, "drafter.schedule": None}
    params |= (
        {"drafter.name": "tiny", "drafter.num_steps": depth, "drafter.topk": 1} if depth else {"drafter.name": "none"}
    )
    metrics = {"output_throughput": value, "windows": windows}
    if half is not None:
        metrics["output_throughput_ci95"] = half
    return PointResult.from_params("ok", params, metrics=metrics)


# batch -> depth -> throughput (each ± 1 over 3 windows)
GRID = {
    1: {0: 50, 1: 70, 2: 85, 3: 100},
    4: {0: 150, 1: 190, 2: 220, 3: 240},
    8: {0: 300, 1: 340, 2: 340.5, 3: 320},
    16: {0: 500, 1: 520, 2: 480, 3: 430},
}


def rows(grid=GRID, **kw):
    return [point(b, d, v, **kw) for b, by in grid.items() for d, v in by.items()]


def test_best_depths_merge_where_they_cannot_be_told_apart():
    data = schedule.build(rows(), "output_throughput", maximize=True)
    # 8: depth 1 and 2 tie (340 vs 340.5, ± 1); 16: depth 1 is best: one range of depth 1.
    assert data["schedule"] == [[1, 4, 3], [5, 16, 1]]
    first, second = data["ranges"]
    assert first["measured"] == [1, 4] and first["not_measured"] == [2, 3] and not first["guess"]
    assert second["not_measured"] == [5, 6, 7, *range(9, 16)]
    assert "batch 8: within the interval of depth 2's best" in second["basis"]
    assert data["per_batch"]["8"]["ties"] == [1, 2]
    assert data["vllm"] == {"num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": data["schedule"]}
    assert data["override"] == "drafter.schedule=[[1,4,3],[5,16,1]]"


def test_no_speculation_where_it_does_not_pay():
    grid = {1: {0: 50, 3: 100}, 16: {0: 500, 3: 430}}
    assert schedule.build(rows(grid), "output_throughput", True)["schedule"] == [[1, 1, 3], [2, 16, 0]]


def test_one_window_is_a_guess_and_never_merges():
    data = schedule.build(rows(half=None, windows=1), "output_throughput", True)
    assert [r["guess"] for r in data["ranges"]] == [True] * 4
    assert data["schedule"] == [[1, 1, 3], [2, 4, 3], [5, 8, 2], [9, 16, 1]]
    assert "a guess (one window, no interval)" in data["ranges"][0]["basis"]


def test_written_schedule_deploys(tmp_path, make_config):
    files, lines = schedule.write(rows(), tmp_path)
    assert files == [tmp_path / "schedule.json"]
    assert Schedule.parse(str(files[0])).as_list() == [[1, 4, 3], [5, 16, 1]]
    cfg = make_config("drafter=tiny", "batch=16", f"drafter.schedule={files[0]}")
    assert cfg.drafter.schedule == [[1, 4, 3], [5, 16, 1]]
    assert lines[1].startswith("use it: drafter.schedule=[[1,4,3],[5,16,1]]")
    assert lines[0].endswith(f" ({schedule.ONE_LAUNCH})")  # one point per depth and batch: one launch each
    relaunched = schedule.build(rows() + rows(), "output_throughput", maximize=True)  # as repeats=2 records
    assert relaunched["launches"] == 2 and schedule.ONE_LAUNCH not in schedule.lines(relaunched, files[0])[0]
    assert json.loads(lines[2].split("--speculative-config ", 1)[1])["num_speculative_tokens_per_batch_size"]


def test_where_no_depth_pays_there_is_nothing_to_deploy(tmp_path):
    grid = {1: {0: 100, 1: 60, 2: 50}, 2: {0: 200, 1: 150, 2: 120}}
    files, lines = schedule.write(rows(grid), tmp_path)
    data = json.loads(files[0].read_text())
    assert data["schedule"] == [[1, 2, 0]] and data["override"] is None and data["vllm"] is None
    assert lines[-1] == "speculation pays at no measured batch: serve drafter=none (no schedule to deploy)"


def test_points_without_two_batches_hold_no_schedule(tmp_path):
    assert schedule.write(rows({4: GRID[4]}), tmp_path) == ([], [])


def scheduled_point(batch: int, value: float, plan) -> PointResult:
    row = point(batch, 1, value)
    row.params |= {"drafter.schedule": plan, "drafter.num_steps": 4}  # num_steps as given, not as run
    return row


def fixed_point(batch: int, depth: int, value: float, plan) -> PointResult:
    row = point(batch, 1, value)
    row.params |= {"drafter.schedule": plan, "drafter.fixed_depth": depth, "drafter.num_steps": 4}
    return row


def test_validation_says_where_the_schedule_beats_ties_and_loses(tmp_path):
    plan = [[1, 4, 3], [5, 16, 1]]
    static = {1: {0: 50, 3: 100, 1: 70}, 4: {0: 150, 3: 240, 1: 190}, 5: {0: 170, 3: 250, 1: 230}}
    static[16] = {0: 500, 3: 430, 1: 520}
    rows = [point(b, 0, v[0]) for b, v in static.items()]
    rows += [fixed_point(b, d, val, plan) for b, v in static.items() for d, val in v.items() if d]
    rows += [scheduled_point(1, 110, plan), scheduled_point(4, 240.5, plan), scheduled_point(5, 200, plan)]
    rows += [scheduled_point(16, 520, plan)]
    files, lines = schedule.write(rows, tmp_path)
    assert files == []  # a sweep that ran a schedule judges it; it writes no new one
    head, *per_batch = lines
    assert "beats at batch 1; ties at batch 4, 16; loses at batch 5" in head
    assert per_batch[0].startswith("batch 1: the schedule (depth 3) beats the best static depth 3")
    # the schedule drafts the best's own depth there: two runs of one setting, whose true ratio is 1
    assert per_batch[0].endswith(f"; the same depth, so an A/A check: {schedule.AA_DIFFERENCE})")
    assert per_batch[1].endswith("within the 95% interval; the same depth, so an A/A check)")
    assert "A/A" not in per_batch[2]  # depth 1 against depth 3
    assert per_batch[2].startswith("batch 5: the schedule (depth 1) loses the best static depth 3")
    assert lines[-1].startswith("threshold 4->5: the schedule's output_throughput drops across it")


def windowed(batch: int, depth: int, tputs: list[float], starts: list[float]) -> PointResult:
    """A point measured in 1 s windows starting at ``starts``, its aggregate as a point records it."""
    row = point(batch, depth, 0.0)
    row.windows = [
        {"output_throughput": t, "window_s": 1.0, "window_start": s, "window_end": s + 1.0}
        for t, s in zip(tputs, starts, strict=True)
    ]
    row.metrics = aggregate(row.windows, MeasureConfig(windows=len(tputs)))
    return row


def test_depths_whose_windows_took_turns_are_compared_paired(tmp_path):
    """Drift shared by partner windows hides a 3% gain unpaired; paired, depth 2 is told from depth 1."""
    drift = [100.0, 160.0, 120.0, 140.0]
    deeper = [d * r for d, r in zip(drift, [1.03, 1.031, 1.029, 1.03], strict=True)]
    turns = [windowed(4, 1, drift, [0.0, 2.0, 4.0, 6.0]), windowed(4, 2, deeper, [1.0, 3.0, 5.0, 7.0])]
    after = [windowed(8, 1, drift, [10.0, 11.0, 12.0, 13.0]), windowed(8, 2, deeper, [14.0, 15.0, 16.0, 17.0])]
    data = schedule.build(turns + after, "output_throughput", maximize=True)
    paired, unpaired = data["per_batch"]["4"], data["per_batch"]["8"]
    assert paired["best"] == 2 and paired["ties"] == [2]
    assert paired["depths"]["1"]["ratio_to_best"]["method"] == "paired"
    assert unpaired["ties"] == [1, 2] and unpaired["depths"]["1"]["ratio_to_best"]["method"] == "unpaired"
    assert "ratio_to_best" not in paired["depths"]["2"] and "paired" in data["intervals"]


def drafting(row: PointResult, tokens: float, steps: float) -> PointResult:
    row.metrics |= {"spec_draft_tokens": tokens, "spec_verify_steps": steps}
    return row


def test_validation_says_where_steps_drafted_another_ranges_depth(tmp_path):
    """At batch 9, just above the 8|9 threshold, each request that ends leaves 8 running until its
    replacement arrives, and those steps draft 5: the line says so, where at batch 16 it does not."""
    plan = [[1, 8, 5], [9, 16, 1]]
    rows = [point(b, 0, 100.0) for b in (9, 16)]
    rows += [drafting(fixed_point(b, 1, 110.0, plan), 1000, 1000) for b in (9, 16)]
    rows += [drafting(fixed_point(b, 5, 90.0, plan), 4900, 1000) for b in (9, 16)]
    rows += [drafting(scheduled_point(9, 104.0, plan), 1150, 1000)]
    rows += [drafting(scheduled_point(16, 110.0, plan), 1003, 1000)]
    _, (_, at9, at16) = schedule.write(rows, tmp_path)
    assert at9.startswith("batch 9: the schedule (depth 1) loses the best static depth 1")
    assert "it drafted 1.15 tokens per draft against static depth 1's 1.00: some steps ran with fewer" in at9
    assert "drafted" not in at16  # 1.003: the tails both arms share


def test_a_range_that_drafts_nothing_says_when_it_drafted(tmp_path):
    plan = [[1, 4, 3], [5, 16, 0]]
    rows = [point(b, 0, 100.0) for b in (4, 5)] + [drafting(fixed_point(b, 3, 90.0, plan), 2900, 1000) for b in (4, 5)]
    rows += [drafting(scheduled_point(4, 90.0, plan), 2900, 1000), drafting(scheduled_point(5, 99.0, plan), 60, 20)]
    _, (_, at4, at5) = schedule.write(rows, tmp_path)
    assert "drafted" not in at4
    assert "it drafted 3.00 tokens per draft against none (the schedule drafts nothing at batch 5)" in at5
