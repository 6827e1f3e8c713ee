"""A Ctrl-C while a server is being stopped (a sweep's teardown after a first Ctrl-C) does not leave
that engine running or its log holding a secret: the server has left the pool by then, so nothing
else would stop it or scrub its log."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from specexp import redaction, servers

SECRET = "hf_secret_value_for_this_test_0123"


@pytest.mark.usefixtures("sigint_handled")
def test_a_ctrl_c_during_a_servers_stop_still_stops_it_and_scrubs_its_log(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "server.log"
    log.write_text(f"loaded with token {SECRET}\n")
    monkeypatch.setattr(redaction, "_known", {SECRET})
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    real_terminate = servers.terminate

    def interrupted_terminate(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C again, as the stop begins
        real_terminate(process, grace_s)

    monkeypatch.setattr(servers, "terminate", interrupted_terminate)
    pool = servers._Pool()
    pool.servers["key"] = servers.Server("key", "http://127.0.0.1:1", engine, log, 0.0, None)
    try:
        with pytest.raises(KeyboardInterrupt):  # said once the server is down
            pool.stop()
    finally:
        alive = engine.poll() is None
        engine.kill()
        engine.wait()
    assert not alive and not pool.servers
    assert SECRET not in log.read_text()
