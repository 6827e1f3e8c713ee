"""Liveness helpers: the progress clock the stall watchdog reads, the restart decision for a group
job that failed to start, a server-side cause from the log, whole store messages."""

import json
import time
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus

from specexp import atomic, tracking
from specexp.load.progress import Progress
from specexp.point.watch import server_cause
from specexp.sweep.groups import ATTEMPTS, Group, restart


def test_the_clock_stalls_only_with_requests_in_flight() -> None:
    clock = Progress()
    clock.last -= 10
    assert not clock.stalled(5)  # nothing waits on the server: an open loop's gap
    with clock.request():
        clock.last -= 10
        assert clock.stalled(5) and clock.in_flight == 1
        clock.moved()
        assert not clock.stalled(5)
    assert clock.in_flight == 0


def test_a_request_ending_is_no_sign_of_life_and_a_gap_with_nothing_in_flight_is_no_silence() -> None:
    clock = Progress()
    with clock.request():
        clock.last -= 10  # 10 s in flight and nothing back: the client's own timeout ends it
    with clock.request():  # the next request, sent at once (batch 1)
        assert clock.stalled(5), "a client timeout shorter than engine.stall_s hid the stall"
    clock = Progress()
    with clock.request():
        clock.moved()  # its last chunk
    clock.last -= 60
    clock.emptied -= 60  # then a minute with nothing in flight (an open loop's gap)
    with clock.request():
        assert not clock.stalled(5) and clock.idle_s() < 1


def test_a_group_job_that_never_started_is_started_again_once(tmp_path: Path) -> None:
    failed = JobReturn()
    failed.status = JobStatus.FAILED
    for outcome in (FileNotFoundError("…/.submitit/1/1_0_log.out"), failed):
        assert restart(tmp_path, 0, outcome, tries=0)
        assert not restart(tmp_path, 0, outcome, tries=1)  # once only
    assert not restart(tmp_path, 0, KeyboardInterrupt(), tries=0)
    done = JobReturn()
    done.status = JobStatus.COMPLETED
    assert not restart(tmp_path, 0, done, tries=0)
    folder = Group.folder(tmp_path, 0)
    folder.mkdir(parents=True)
    (folder / ATTEMPTS).write_text(json.dumps({"event": "start", "time": time.time()}) + "\n")
    assert not restart(tmp_path, 0, RuntimeError("it began, then failed"), tries=0)


def test_the_server_log_names_the_cause_of_an_engine_failure(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    earlier = "RuntimeError: an earlier point's failure\n"
    log.write_text(
        earlier + "INFO: request 3\nTraceback (most recent call last):\n  File x\n"
        "RuntimeError: DefaultCPUAllocator: not enough memory: you tried to allocate 26843545600 bytes.\n"
        "INFO: 500 Internal Server Error\n"
    )
    cause = server_cause(log, len(earlier))
    assert cause.endswith(
        "RuntimeError: DefaultCPUAllocator: not enough memory: you tried to allocate 26843545600 bytes."
    )
    assert "earlier point" not in cause
    assert server_cause(tmp_path / "absent.log", 0) == ""


def test_store_messages_are_whole_and_on_one_line() -> None:
    words = "word " * 400
    message = tracking.store_message(RuntimeError(f"The filesystem backend\nis deprecated. {words}"))
    assert "\n" not in message and message.startswith("The filesystem backend is deprecated.")
    assert message.endswith("word [...]")  # cut at a word, and marked


def test_an_atomic_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text("old")
    try:
        with atomic.replacing(path) as tmp:
            tmp.write_text("half")
            raise OSError(28, "No space left on device")
    except OSError as exc:
        assert atomic.reason(exc) == f"could not write {path}: No space left on device"
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["results.json"]
