"""What a single run and a sweep print beside their tables: the drafter in words, why a speedup is
missing, the MLflow link on the port the user serves the UI on; the live display's modes."""

import logging
import time

from specexp import help, live
from specexp.config import TrackingConfig
from specexp.console import single_run_notes
from specexp.live import PointState
from specexp.result import PointResult
from specexp.tracking import ui_hint


def point(drafter: str, **kw) -> PointResult:
    return PointResult(status="ok", engine="torch", model="tiny", drafter=drafter, batch=4, **kw)


def test_a_single_speculative_run_names_its_drafter_says_why_no_speedup_and_links() -> None:
    what = help.preset_description("drafter", "tiny")
    assert what.startswith("A 1-layer draft model")
    lines = single_run_notes(point("tiny"), what, "http://x/#/runs/1")
    assert lines[0] == f"drafter=tiny: {what}"
    assert "no drafter=none baseline" in lines[1] and "drafter=none,tiny batch=4 -m" in lines[1]
    assert lines[2:] == ["in MLflow:", "http://x/#/runs/1"]  # the URL on a line of its own
    rate = single_run_notes(point("tiny", load="rate", rate=2.0), what, None)
    assert "load=rate rate=2 -m" in rate[1] and len(rate) == 2
    assert not any("speedup" in x for x in single_run_notes(point("none"), "", None))
    assert help.preset_description("drafter", "no-such-preset") == ""


def test_the_printed_link_uses_the_ui_port_or_the_servers_own_url() -> None:
    local = ui_hint(TrackingConfig(uri="sqlite:///o/mlflow.db", ui_port=5123), "1", "abc")
    assert "--port 5123, then http://127.0.0.1:5123/#/experiments/1/runs/abc" in local
    remote = ui_hint(TrackingConfig(uri="http://mlflow.lab:8080/", ui_port=5123), "1", "abc")
    assert remote.startswith("http://mlflow.lab:8080/#/experiments/1/runs/abc")


def test_debug_logging_turns_the_live_status_into_plain_lines(monkeypatch) -> None:
    monkeypatch.setattr(type(live.console), "is_terminal", property(lambda self: True))
    assert live.live()
    logger = logging.getLogger("specexp")
    before = logger.level
    logger.setLevel(logging.DEBUG)  # what hydra.verbose=specexp (or true) does
    try:
        assert not live.live()
    finally:
        logger.setLevel(before)


def test_eta_is_this_windows_rest_then_the_windows_still_asked_for() -> None:
    state = PointState(1, "drafter=tiny batch=4", windows=3, window=1, done=4, requests=8)
    state.window_started = time.monotonic() - 2.0  # 4 of 8 requests in 2 s: 4 s a window
    assert abs(state.eta_s() - (2.0 + 2 * 4.0)) < 0.2
    assert PointState(1, "x", windows=3).eta_s() is None  # nothing done yet: no guess
