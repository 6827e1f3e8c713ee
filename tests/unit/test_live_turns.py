"""Live progress while arms take turns (issue 38, item 4): a point that has started and waits for
its first window says "waiting its turn", not "starting" with a growing clock."""

from __future__ import annotations

import re
import threading
import time

from specexp import live


def statuses() -> dict[str, str]:
    progress = live._display.progress
    return {t.description.split(" · ")[0]: t.fields["status"] for t in progress.tasks} if progress else {}


def test_an_arm_before_its_first_window_waits_its_turn(monkeypatch) -> None:
    monkeypatch.setattr(type(live.console), "is_terminal", property(lambda self: True))
    monkeypatch.setattr(live, "_display", live.Display())
    ends: dict[str, threading.Event] = {"A": threading.Event(), "B": threading.Event()}
    seen: list[dict[str, str]] = []

    def arm(number: int, name: str, started: threading.Event, window: threading.Event) -> None:
        live.point_started(number, name, windows=3)
        started.set()
        window.wait()
        with live.window(8):
            seen.append(statuses())
        ends[name].wait()
        live.point_ended("ok", "done")

    a_started, b_started, a_window, b_window = (threading.Event() for _ in range(4))
    threads = [
        threading.Thread(target=arm, args=(1, "A", a_started, a_window), daemon=True),
        threading.Thread(target=arm, args=(2, "B", b_started, b_window), daemon=True),
    ]
    threads[0].start()
    a_started.wait()
    assert statuses() == {"point 1 A": "starting"}  # its server and warm-up: it holds the machine
    threads[1].start()
    b_started.wait()
    assert statuses() == {"point 1 A": "waiting its turn", "point 2 B": "starting"}
    a_window.set()  # A's first window: B, started, waits for its own
    while not seen:
        threads[0].join(0.01)
    assert seen[0]["point 2 B"] == "waiting its turn"
    b_window.set()
    ends["A"].set()
    ends["B"].set()
    for thread in threads:
        thread.join()
    assert live._display.progress is None  # every point ended: the status lines are gone


def test_a_window_shows_its_requests_and_once_one_is_done_an_eta() -> None:
    """2 of 8 requests done 3 s into window 1 of 3: 9 s left in it, then two windows of 12 s."""
    state = live.PointState(1, "drafter=tiny batch=1", windows=3, window=1, requests=8)
    state.window_started, state.tokens = time.monotonic() - 3, 300
    assert live._window_status(state).startswith("0/8 requests · ") and "ETA" not in live._window_status(state)
    state.done = 2
    status = live._window_status(state)
    assert re.fullmatch(r"2/8 requests · 100 tok/s · ETA 33 s", status), status
