"""Arms taking turns stop together on their speedups (specexp.metrics.joint_stop), on synthetic paired
windows with known answers: the rule alone, then arms in threads taking turns (specexp.sweep.turns)."""

import itertools
import threading

import numpy as np
import pytest

from specexp.config import MeasureConfig
from specexp.metrics.joint_stop import OWN, SPEEDUP, Alone, JointStop, Stopped, stopping
from specexp.metrics.sequential import alpha_at, widen
from specexp.metrics.stats import arm_ratio
from specexp.metrics.window_results import aggregate, speedups_precise
from specexp.report.analysis import apply
from specexp.result import PointResult
from specexp.sweep.turns import side_by_side

MEASURE = MeasureConfig(windows=6, rel_ci=0.03, max_windows=12)  # looks at 6, 9 and 12 windows


def windows(tputs: list[float]) -> list[dict[str, float]]:
    return [{"output_throughput": t, "window_s": 1.0} for t in tputs]


def paired(rounds: int, speedups: list[float], noise: list[float], drift: float, seed: int = 1) -> list[list[float]]:
    """Throughputs of a baseline (100 tok/s) and arms at ``speedups``, window by window: the machine's
    state (``drift``, log sd) shared by the partners of a round, each arm's own ``noise`` on top."""
    rng = np.random.default_rng(seed)
    state = np.exp(rng.normal(0.0, drift, rounds))
    return [
        list(100.0 * s * state * np.exp(rng.normal(0.0, sd, rounds)))
        for s, sd in zip([1.0, *speedups], noise, strict=True)
    ]


def rounds(joint: JointStop, tputs: list[list[float]], measures: list[MeasureConfig] | None = None) -> list[int]:
    """Arms joined to ``joint`` measured round by round, in order (the first the baseline): each arm
    leaves when its stop says so or when its go comes after the arms stopped. The windows each got."""
    measures = measures or [MEASURE] * len(tputs)
    arms = [joint.join(i, m, baseline=i == 0) for i, m in enumerate(measures)]
    got: list[list[float]] = [[] for _ in tputs]
    active = list(range(len(tputs)))
    for _ in range(MEASURE.max_windows):
        for i in list(active):
            if joint.stopped(i):
                active.remove(i)
                continue
            got[i].append(tputs[i][len(got[i])])
            if not arms[i].more(windows(got[i]), 0.0):
                active.remove(i)
                joint.leave(i)
    return [len(g) for g in got]


def test_arms_stop_together_at_the_first_look_where_the_speedup_is_precise() -> None:
    """A busy machine: each arm's throughput swings by 15% window to window, so alone neither would stop
    at 6 windows; but the partners swing together, and their speedup is known to ±1% at once."""
    tputs = paired(20, [1.5], noise=[0.004, 0.004], drift=0.15)
    assert Alone(MEASURE).more(windows(tputs[0][:6]), 0.0)  # the old rule: the baseline's throughput goes on
    joint = JointStop(2)
    assert rounds(joint, tputs) == [6, 6] and joint.until == 6


def test_the_speedup_not_one_arms_throughput_decides() -> None:
    """A quiet machine, the arms' noise their own: each arm alone is precise enough at the first look,
    their speedup (both noises) is not, and the arms go on together to a later look."""
    tputs = paired(20, [1.3], noise=[0.013, 0.013], drift=0.0, seed=4)
    assert not Alone(MEASURE).more(windows(tputs[0][:6]), 0.0)  # alone, each would stop at 6
    assert not Alone(MEASURE).more(windows(tputs[1][:6]), 0.0)
    joint = JointStop(2)
    n = rounds(joint, tputs)
    assert n[0] == n[1] == joint.until and joint.until in (9, 12)
    est = widen(arm_ratio((tputs[1][:6], [1.0] * 6), (tputs[0][:6], [1.0] * 6), paired=True), alpha_at(6, 6, 12))
    assert est.half / est.value > MEASURE.rel_ci  # what kept them going at 6


def test_the_baseline_goes_on_while_any_speculative_arm_does() -> None:
    """One speculative arm is precise at the first look, the other (its own noise 5%) is not: every arm,
    the precise one and the baseline included, goes on to the look where both are."""
    tputs = paired(20, [1.5, 1.2], noise=[0.003, 0.003, 0.05], drift=0.1)
    base, precise, noisy = (windows(t[:6]) for t in tputs)
    assert speedups_precise(base, [precise], MEASURE) and not speedups_precise(base, [noisy], MEASURE)
    joint = JointStop(3)
    n = rounds(joint, tputs)
    assert n[0] == n[1] == n[2] == joint.until > 6


def test_without_a_baseline_each_arm_decides_alone_on_its_own_throughput() -> None:
    tputs = paired(20, [1.5], noise=[0.004, 0.004], drift=0.15)
    joint = JointStop(2)
    a = joint.join(0, MEASURE, baseline=False)
    joint.join(1, MEASURE, baseline=False)
    assert a.more(windows(tputs[0][:6]), 0.0) == Alone(MEASURE).more(windows(tputs[0][:6]), 0.0)
    assert a.stopped_on == OWN and joint.until is None
    other = MeasureConfig(windows=6, rel_ci=0.05, max_windows=12)  # settings that differ: alone too
    mixed = JointStop(2)
    assert rounds(mixed, tputs, [MEASURE, other]) != [6, 6]  # each on its own swinging throughput: no joint stop at 6
    assert stopping(lambda: None, MEASURE, baseline=True).stopped_on == OWN  # a point alone
    assert stopping(lambda: None, MeasureConfig(), baseline=True).stopped_on == "windows"  # no target


def test_a_baseline_that_leaves_hands_each_arm_back_its_own_rule() -> None:
    joint = JointStop(2)
    joint.join(0, MEASURE, baseline=True)
    spec = joint.join(1, MEASURE, baseline=False)
    assert spec.more(windows([150.0] * 2), 0.0) and spec.stopped_on == SPEEDUP
    joint.leave(0)  # the baseline's server died
    assert not spec.more(windows([150.0] * 6), 0.0) and spec.stopped_on == OWN  # steady: it stops at 6 alone


def test_a_cap_on_any_arms_clock_stops_every_arm_at_the_most_windows_any_has() -> None:
    noisy = MeasureConfig(windows=6, rel_ci=0.001, max_windows=12, max_s=10.0)
    joint = JointStop(2)
    base, spec = joint.join(0, noisy, baseline=True), joint.join(1, noisy, baseline=False)
    assert base.more(windows([100.0, 90.0, 110.0]), 5.0)
    assert not spec.more(windows([150.0, 120.0, 160.0]), 11.0)  # past max_s
    assert joint.until == 3 and joint.stopped(0)  # the baseline's go (after its third window) is ruled out


def turns_arm(name: str, tputs: list[float], baseline: bool, log: list[str], clock: itertools.count):
    """An arm as specexp.point.windows.measure_windows runs it: ask, wait for the go, measure, ask again."""

    def work(turn):
        rule = stopping(turn, MEASURE, baseline)
        got: list[dict[str, float]] = []
        while rule.more(got, 0.0):
            try:
                with turn():
                    start = next(clock)
                    got.append({"output_throughput": tputs[len(got)], "window_s": 1.0, "window_start": start})
                    got[-1]["window_end"] = start + 0.5
                    log.append(f"{name}{len(got) - 1}")
            except Stopped:
                log.append(f"{name} stopped at its go")
                break
        return got, rule.stopped_on

    return work


def point(drafter: str, got: list[dict[str, float]]) -> PointResult:
    params = {"engine.name": "torch", "drafter.name": drafter, "batch": 4, "sweep_id": "s"}
    params |= {"measure.windows": 6, "measure.max_windows": 12, "measure.rel_ci": MEASURE.rel_ci}
    row = PointResult.from_params("ok", params, windows=got)
    row.metrics = aggregate(got, MEASURE)
    return row


def test_arms_taking_turns_stop_at_the_same_look_and_the_report_reads_it() -> None:
    """Three arms in threads, turns in a serpentine: all stop at one look, the arm whose go came after
    the decision leaves without a window, nobody waits forever; the analysis reports each speedup at
    that look's level, exactly what the rule judged, so within ± rel_ci."""
    tputs = paired(20, [1.5, 1.2], noise=[0.003, 0.003, 0.03], drift=0.1)
    log: list[str] = []
    clock = itertools.count()
    work = [turns_arm(n, t, n == "none", log, clock) for n, t in zip(["none", "a", "b"], tputs, strict=True)]
    out: list = []
    runner = threading.Thread(target=lambda: out.extend(side_by_side(work, on_interrupt=lambda: None)), daemon=True)
    runner.start()
    runner.join(timeout=20)
    assert not runner.is_alive(), f"deadlock: {log[-6:]}"
    counts = {len(got) for got, _ in out}
    assert len(counts) == 1 and counts.pop() in (9, 12)  # one look, past the first
    assert {on for _, on in out} == {SPEEDUP}
    assert sum("stopped at its go" in e for e in log) == 2  # the round's last decided; the others' go came after
    rows = [point(d, got) for d, (got, _) in zip(["none", "tiny", "tiny2"], out, strict=True)]
    rows[2].params["drafter.name"] = "tiny2"
    n = len(out[0][0])
    for row, (got, _) in zip(rows[1:], out[1:], strict=True):
        speedup = apply([rows[0], row]).speedups[1]
        sums = ([w["output_throughput"] for w in got], [1.0] * n)
        base = ([w["output_throughput"] for w in out[0][0]], [1.0] * n)
        judged = widen(arm_ratio(sums, base, paired=True), alpha_at(n, 6, 12))
        assert (speedup["speedup_lo"], speedup["speedup_hi"]) == pytest.approx((judged.lo, judged.hi))
        assert (judged.hi - judged.lo) / 2 / judged.value <= MEASURE.rel_ci
