"""Arms taking turns (specexp.sweep.turns): one at a time, windows alternating, arms that end or fail
leave the rotation, an interrupt reaches every arm."""

import _thread
import threading
import time

import pytest

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


def windows(log: list[str]) -> list[str]:
    return [e for e in log if " " not in e]


def test_windows_alternate_and_never_overlap() -> None:
    log: list[str] = []
    assert side_by_side([arm("A", 3, log), arm("B", 3, log)], on_interrupt=lambda: None) == ["A", "B"]
    assert windows(log) == ["A0", "B0", "A1", "B1", "A2", "B2"]
    assert all(log[i + 1] == f"{e} end" for i, e in enumerate(log) if e in windows(log))  # one at a time
    assert log.index("B start") > log.index("A0 end")  # B's server starts in B's turn, not in A's window


def test_an_arm_with_more_windows_goes_on_alone() -> None:
    log: list[str] = []
    side_by_side([arm("A", 1, log), arm("B", 3, log), arm("C", 2, log)], on_interrupt=lambda: None)
    assert windows(log) == ["A0", "B0", "C0", "B1", "C1", "B2"]


def test_a_failing_arm_leaves_and_the_others_are_measured() -> None:
    log: list[str] = []
    outcomes = side_by_side([arm("A", 2, log, fail_at=1), arm("B", 3, log)], on_interrupt=lambda: None)
    assert isinstance(outcomes[0], RuntimeError) and outcomes[1] == "B"
    assert windows(log) == ["A0", "B0", "B1", "B2"]


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

    def interrupt_soon() -> None:
        time.sleep(0.2)
        _thread.interrupt_main()

    threading.Thread(target=interrupt_soon, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        side_by_side([slow, waiting], on_interrupt=stopped.set)
    assert stopped.is_set() and log == []
    assert issubclass(Interrupted, KeyboardInterrupt)  # point.run records an interrupted arm as interrupted


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

    def interrupt_soon() -> None:
        time.sleep(0.3)
        _thread.interrupt_main()

    threading.Thread(target=interrupt_soon, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        side_by_side([warming_up, arm("B", 1, log)], on_interrupt=lambda: log.append("servers stopped"))
    assert log == ["A recorded interrupted", "servers stopped"]  # the arm first, then the teardown


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
        side_by_side([recording, arm("B", 1, log)], on_interrupt=lambda: log.append("servers stopped"))
    assert log == ["A0", "A recorded", "servers stopped"]  # B's window never came
