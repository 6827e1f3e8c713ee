"""Arms taking turns (specexp.sweep.turns): one at a time, windows alternating in a serpentine order
(each round the other way), arms that end or fail leave the rotation, an interrupt reaches every arm."""

import _thread
import itertools
import math
import threading
import time

import pytest

from specexp.metrics.stats import arm_ratio
from specexp.sweep.turns import Interrupted, side_by_side


def arm(name: str, windows: int, log: list[str], fail_at: int | None = None):
    def work(turn):
        log.append(f"{name} start")  # server start, warm-up: holding the machine
        for w in range(windows):
            if w == fail_at:
                raise RuntimeError(f"{name} failed")
            with turn():
                log.append(f"{name}{w}")
                time.sleep(0.01)  # the other arm must not get in here
                log.append(f"{name}{w} end")
        log.append(f"{name} done")
        return name

    return work


def interrupt_main_after(seconds: float) -> None:
    """Ctrl-C to the main thread (which runs side_by_side) ``seconds`` from now."""

    def interrupt() -> None:
        time.sleep(seconds)
        _thread.interrupt_main()

    threading.Thread(target=interrupt, daemon=True).start()


def windows(log: list[str]) -> list[str]:
    return [e for e in log if " " not in e]


def test_windows_alternate_and_never_overlap() -> None:
    log: list[str] = []
    assert side_by_side([arm("A", 4, log), arm("B", 4, log)], on_interrupt=lambda: None) == ["A", "B"]
    # both start first; then ABBA: window i's pair opens with B for even i and with A for odd i, so a
    # linear drift cancels in the mean of the pairs
    assert windows(log) == ["B0", "A0", "A1", "B1", "B2", "A2", "A3", "B3"]
    assert all(log[i + 1] == f"{e} end" for i, e in enumerate(log) if e in windows(log))  # one at a time
    assert log.index("A start") < log.index("B start") < log.index("B0")  # starts in turn, before windows


def test_a_linear_drift_cancels_in_the_paired_speedup() -> None:
    """The machine slows down steadily (2% of its first speed a window): with every pair opening on the
    same arm each pair's ratio would be off the same way; in turn A B | B A the pairs are off either
    way, and each arm's windows have the same mean time, so the ratio of their sums is exact."""
    clock = itertools.count()
    tputs: dict[str, list[float]] = {"none": [], "tiny": []}

    def measure(name: str, speed: float):
        def work(turn):
            for _ in range(8):
                with turn():
                    tputs[name].append(speed * (1 - 0.02 * next(clock)))

        return work

    side_by_side([measure("none", 100.0), measure("tiny", 150.0)], on_interrupt=lambda: None)
    logs = [math.log(t / n) - math.log(1.5) for t, n in zip(tputs["tiny"], tputs["none"], strict=True)]
    assert min(logs) < -0.01 and max(logs) > 0.01  # each pair is off by the drift, either way
    seconds = [1.0] * 8
    found = arm_ratio((tputs["tiny"], seconds), (tputs["none"], seconds), paired=True)
    assert found.value == pytest.approx(1.5)  # their ratio of sums is not


def test_an_arm_with_more_windows_goes_on_alone() -> None:
    log: list[str] = []
    side_by_side([arm("A", 1, log), arm("B", 3, log), arm("C", 2, log)], on_interrupt=lambda: None)
    assert windows(log) == ["C0", "B0", "A0", "B1", "C1", "B2"]


def test_three_arms_go_round_each_way_in_turn() -> None:
    log: list[str] = []
    side_by_side([arm("A", 3, log), arm("B", 3, log), arm("C", 3, log)], on_interrupt=lambda: None)
    assert windows(log) == ["C0", "B0", "A0", "A1", "B1", "C1", "C2", "B2", "A2"]


def test_a_failing_arm_leaves_and_the_others_are_measured() -> None:
    log: list[str] = []
    outcomes = side_by_side([arm("A", 2, log, fail_at=1), arm("B", 3, log)], on_interrupt=lambda: None)
    assert isinstance(outcomes[0], RuntimeError) and outcomes[1] == "B"
    assert windows(log) == ["B0", "A0", "B1", "B2"]


def test_an_arm_failing_at_the_end_of_a_round_hands_on_to_its_neighbour() -> None:
    log: list[str] = []
    outcomes = side_by_side([arm("A", 3, log), arm("B", 3, log, fail_at=1)], on_interrupt=lambda: None)
    assert isinstance(outcomes[1], RuntimeError) and outcomes[0] == "A"
    assert windows(log) == ["B0", "A0", "A1", "A2"]  # B fails as the round's last: A goes on


@pytest.mark.usefixtures("sigint_handled")
def test_an_interrupt_reaches_arms_waiting_for_their_turn() -> None:
    log: list[str] = []
    stopped = threading.Event()

    def slow(turn):
        with turn():
            deadline = time.monotonic() + 5
            while not stopped.wait(0.05) and time.monotonic() < deadline:  # a window, load in flight
                pass
            raise ConnectionError("server gone")

    def waiting(turn):
        with turn():
            log.append("B measured")  # never: B's go comes after A's window, which the interrupt ends

    interrupt_main_after(0.2)
    with pytest.raises(KeyboardInterrupt):
        side_by_side([waiting, slow], on_interrupt=stopped.set)  # the last to start measures first
    assert stopped.is_set() and log == []
    assert issubclass(Interrupted, KeyboardInterrupt)  # point.run records an interrupted arm as interrupted


@pytest.mark.usefixtures("sigint_handled")
def test_an_interrupt_reaches_the_arm_holding_the_machine_outside_a_window() -> None:
    log: list[str] = []

    def warming_up(turn):
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # busy before its first window: no server to stop here
                time.sleep(0.01)
        except KeyboardInterrupt:
            log.append("A recorded interrupted")
            raise

    interrupt_main_after(0.3)
    with pytest.raises(KeyboardInterrupt):
        side_by_side([warming_up, arm("B", 1, log)], on_interrupt=lambda: log.append("servers stopped"))
    assert log == ["A recorded interrupted", "servers stopped"]  # the arm first, then the teardown


@pytest.mark.usefixtures("sigint_handled")
def test_an_arm_recording_its_point_is_let_finish() -> None:
    """An interrupt after an arm's last window does not cut its recording short (CI saw a point's
    MLflow upload cut half way: its run had no params)."""
    log: list[str] = []

    def recording(turn):
        with turn():
            log.append("A0")
        _thread.interrupt_main()  # Ctrl-C while A writes its results and uploads them
        for _ in range(50):
            time.sleep(0.01)
        log.append("A recorded")
        return "A"

    with pytest.raises(KeyboardInterrupt):
        side_by_side([arm("B", 1, log), recording], on_interrupt=lambda: log.append("servers stopped"))
    assert log == ["B start", "A0", "A recorded", "servers stopped"]  # B's window never came


@pytest.mark.usefixtures("sigint_handled")
def test_a_second_interrupt_while_the_arm_records_still_stops_the_servers_after_it() -> None:
    """Ctrl-C twice: the second, while the main thread waits for the interrupted arm's record, used
    to skip the wait and the servers' stop (on_interrupt)."""
    log: list[str] = []

    def measuring(turn):
        try:
            with turn():
                for _ in range(1000):  # short sleeps: the interrupt reaches a thread between them
                    time.sleep(0.01)
        except KeyboardInterrupt:
            _thread.interrupt_main()  # Ctrl-C again while this arm writes its results
            time.sleep(0.5)
            log.append("A recorded interrupted")
            raise

    interrupt_main_after(0.3)
    with pytest.raises(KeyboardInterrupt):
        side_by_side([measuring, arm("B", 1, log)], on_interrupt=lambda: log.append("servers stopped"))
    assert log[-2:] == ["A recorded interrupted", "servers stopped"]  # B measured its one window first
