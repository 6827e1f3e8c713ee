"""The tuner on a noisy objective: the best configuration is chosen on its interval, repeated
measurements of one configuration are pooled as one arm's windows, the configurations it cannot be
told apart from are named, and a deterministic objective's configuration is never measured twice."""

import math

import numpy as np
from optuna.distributions import IntDistribution
from optuna.trial import create_trial

from specexp.metrics.stats import estimate, from_interval
from specexp.report.study import best_per_batch, pool
from specexp.result import PointResult
from specexp.sweep.trials import measured_before

STEPS = {"drafter.num_steps": IntDistribution(1, 8)}


def trial(number: int, steps: int, value: float, half: float, deterministic: bool = False):
    t = create_trial(
        params={"drafter.num_steps": steps},
        distributions=STEPS,
        values=[value],
        user_attrs={"ci95": [half], "constraints": [], "deterministic": deterministic},
    )
    t.number = number
    return t


def point(trial: int, steps: int, windows: list[float]) -> PointResult:
    e = estimate(windows)
    metrics = {"output_throughput": e.value, "output_throughput_ci95": e.half, "windows": len(windows)}
    params = {"drafter.num_steps": steps, "batch": 4}
    tags = {"optuna.trial": str(trial), "optuna.feasible": "true"}
    return PointResult("ok", "torch", "tiny", "tiny", 4, params=params, metrics=metrics, tags=tags)


def test_pooling_measurements_equals_estimating_over_all_their_windows() -> None:
    rng = np.random.default_rng(1)
    parts = [rng.normal(300, 20, n).tolist() for n in (3, 3, 5)]
    pooled = pool([from_interval(*_recorded(w)) for w in parts])
    direct = estimate([x for w in parts for x in w])
    assert math.isclose(pooled.value, direct.value) and math.isclose(pooled.se, direct.se)
    assert pooled.df == direct.df == 10


def _recorded(windows: list[float]) -> tuple[float, float, int]:
    e = estimate(windows)
    return e.value, e.half, len(windows)


def test_the_lucky_measurement_is_not_declared_best_and_its_peer_is_named() -> None:
    # num_steps=4 once in a lucky spread (401.7 ± ~160), num_steps=3 steady about 380
    lucky = point(0, 4, [300.0, 405.0, 500.0])
    steady = [point(1, 3, [378.0, 380.0, 382.0]), point(2, 3, [379.0, 381.0, 380.0])]
    (line,) = best_per_batch([lucky, *steady], ["drafter.num_steps"], "output_throughput", maximize=True)
    assert line.startswith("best at batch 4: drafter.num_steps=3 (output_throughput 380.0")
    assert "trials 1, 2 pooled, 6 windows" in line  # one arm, not two trials
    assert line.endswith("no single best: indistinguishable at 95% from drafter.num_steps=4 (trial 0)")


def test_a_clear_best_names_no_peer() -> None:
    rows = [point(0, 2, [200.0, 201.0, 199.0]), point(1, 3, [300.0, 301.0, 299.0])]
    (line,) = best_per_batch(rows, ["drafter.num_steps"], "output_throughput", maximize=True)
    expected = "output_throughput 300.0 [297.5, 302.5] 95% t over windows, trial 1"
    assert line == f"best at batch 4: drafter.num_steps=3 ({expected})"


def test_a_deterministic_configuration_is_found_again_and_a_noisy_one_is_not() -> None:
    trials = [trial(0, 4, 2.5, 0.0, deterministic=True), trial(1, 3, 380.0, 6.0)]
    assert measured_before(trials, {"drafter.num_steps": 4}) is trials[0]
    assert measured_before(trials, {"drafter.num_steps": 3}) is None  # noisy: measure again
    assert measured_before(trials, {"drafter.num_steps": 5}) is None


def tree_point(trial: int, batch: int, steps: int, topk: int, value: float) -> PointResult:
    metrics = {"output_throughput": value, "output_throughput_ci95": 1.0, "windows": 3}
    params = {"drafter.num_steps": steps, "drafter.topk": topk, "batch": batch}
    tags = {"optuna.trial": str(trial), "optuna.feasible": "true"}
    return PointResult("ok", "sglang", "m", "ttt5", batch, params=params, metrics=metrics, tags=tags)


def test_the_depth_plot_has_a_panel_per_batch_and_joins_each_depths_best(tmp_path, monkeypatch) -> None:
    import matplotlib.pyplot as plt

    from specexp.report.study import depth_plot

    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)  # the figure, kept to be read
    rows = [
        tree_point(0, 1, 2, 1, 100.0),
        tree_point(1, 1, 2, 4, 120.0),  # depth 2's best at batch 1: a tree
        tree_point(2, 1, 3, 2, 110.0),
        tree_point(0, 16, 2, 1, 900.0),  # another batch, on another scale
        tree_point(1, 16, 2, 4, 800.0),
        PointResult("ok", "sglang", "m", "none", 16, metrics={"output_throughput": 850.0}, params={"batch": 16}),
    ]
    path = depth_plot(rows, "drafter.num_steps", "output_throughput", tmp_path / "d.png", ["drafter.topk"])
    assert path is not None and path.stat().st_size > 10_000
    (fig,) = drawn
    one, sixteen = fig.axes
    assert (one.get_title(), sixteen.get_title()) == ("batch 1", "batch 16")

    def joined(ax):  # the line through each depth's best (an errorbar's data line: markers and a line)
        (line,) = [x for x in ax.get_lines() if x.get_marker() == "o" and x.get_linestyle() == "-"]
        return list(line.get_xdata()), list(line.get_ydata())

    assert joined(one) == ([2.0, 3.0], [120.0, 110.0])  # depth 2's best is the top-4 tree
    assert joined(sixteen) == ([2.0], [900.0])
    dashed = {
        ax.get_title(): [list(x.get_ydata()) for x in ax.get_lines() if x.get_linestyle() == "--"] for ax in fig.axes
    }
    assert dashed == {"batch 1": [], "batch 16": [[850.0, 850.0]]}  # each batch's own drafter=none, if measured


def test_the_best_line_names_the_ties_the_schedule_names() -> None:
    """One interval engine: intervals that overlap (982.7 ± 40.9 and 887.8 ± 59.7, 8 windows each, as a
    study measured depth 3 and 1 at batch 4) can still have a ratio told from 1, and the study's best line
    must not call them indistinguishable while the schedule built from the same points calls depth 3 best."""
    from specexp.report import schedule

    def arm(trial: int, steps: int, value: float, half: float) -> PointResult:
        row = point(trial, steps, [value])
        row.metrics |= {"output_throughput_ci95": half, "windows": 8}
        row.params |= {"engine.name": "torch", "drafter.name": "tiny", "drafter.topk": 1}
        return row

    near = [arm(0, 3, 982.7, 40.9), arm(1, 1, 887.8, 59.7), arm(2, 2, 960.0, 50.0)]
    other = [arm(3, 3, 500.0, 5.0), arm(4, 1, 400.0, 5.0), arm(5, 2, 450.0, 5.0)]
    for row in other:
        row.batch = 8
        row.params["batch"] = 8
    data = schedule.build(near + other, "output_throughput", maximize=True)
    assert data["per_batch"]["4"]["ties"] == [2, 3]
    (line, _) = best_per_batch(near + other, ["drafter.num_steps"], "output_throughput", maximize=True)
    assert line.endswith("no single best: indistinguishable at 95% from drafter.num_steps=2 (trial 2)")


def test_exact_objectives_tie_when_equal_and_differ_otherwise() -> None:
    from specexp.report.study import apart

    exact = from_interval(2.5, 0.0, 3)  # windows that agree exactly: no spread, no ratio interval
    assert not apart(exact, from_interval(2.5, 0.0, 3))
    assert apart(exact, from_interval(3.0, 0.0, 3))
    assert not apart(from_interval(100.0, 5.0, 1), from_interval(200.0, 5.0, 3))  # one window: no interval
