"""engine=external against a live reference engine the test starts: measured, never torn down,
its API key never written anywhere."""

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from specexp.servers import serve_reference as serve
from tests.load.endpoint import SERVED, Endpoint, serving

SECRET = "sk-test-0123456789abcdef"
CUT = ["engine=external", f"engine.model_name={SERVED}", "engine.flavor=openai", "drafter=none", "batch=2"]


@pytest.fixture(scope="module")
def remote(shared_outputs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Someone else's endpoint, one for the module (launching it is not what is tested): the tiny
    target served as remote-tiny, drafting with the tiny draft model; its URL."""
    tiny = shared_outputs / "models" / "tiny"
    args = [
        "--model",
        str(tiny / "target"),
        "--served-model-name",
        "remote-tiny",
        "--draft-model",
        str(tiny / "draft"),
        "--num-speculative-tokens",
        "3",
        "--max-running-requests",
        "4",
        "--num-continuous-decode-steps",
        "1",
        "--threads",
        "1",
    ]
    with serve(args, tmp_path_factory.mktemp("remote") / "server.log") as url:
        yield url


def test_external_endpoint_is_measured_and_left_running(specexp, remote: str, monkeypatch) -> None:
    monkeypatch.setenv("SPECEXP_TEST_KEY", SECRET)
    run = specexp(
        "engine=external",
        f"engine.url={remote}",
        "engine.model_name=remote-tiny",
        "engine.api_key_env=SPECEXP_TEST_KEY",
        "drafter=none",
        "batch=2",
    )
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    with urllib.request.urlopen(remote + "/health") as resp:  # still up: external servers are not ours
        assert resp.status == 200
    (logged,) = run.runs()
    m = logged.data.metrics
    tags = logged.data.tags
    assert tags["specexp.acceptance"] == "measured" and tags["specexp.external_flavor"] == "specexp"
    assert tags["specexp.token_source"] == "usage" and "specexp.unavailable" not in tags
    # the drafter is what the user states (engine.drafter), unknown by default: never the drafter group's
    assert tags["specexp.drafter"] == logged.data.params["drafter.name"] == "unknown"
    assert [k for k in logged.data.params if k.startswith("drafter.")] == ["drafter.name"]  # no preset fields
    windows = json.loads((run.workdir / "run" / "results.json").read_text())["windows"]
    for w in windows:  # per window: 1 + accepted per verify step (the point's value is their mean)
        assert w["accept_length"] == pytest.approx(1 + w["spec_accepted_tokens"] / w["spec_verify_steps"])
    assert 0 < m["accept_rate"] <= 1
    assert m["server_tpot_ms_mean"] > 0 and m["server_ttft_ms_mean"] > 0
    assert "client_server_gap" in m or m["client_burst_share"] > 0.01  # compared unless read in bursts
    assert logged.data.params["engine.api_key_env"] == "SPECEXP_TEST_KEY"
    assert SECRET not in str(logged.data.params) and SECRET not in str(logged.data.tags)
    for path in (run.workdir / "run").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    assert SECRET not in run.proc.stdout + run.proc.stderr


def test_missing_key_variable_fails_before_anything(specexp, monkeypatch) -> None:
    monkeypatch.delenv("SPECEXP_ABSENT_KEY", raising=False)
    run = specexp("engine=external", "engine.url=http://127.0.0.1:9", "engine.api_key_env=SPECEXP_ABSENT_KEY")
    assert run.proc.returncode == 2
    assert "engine.api_key_env" in run.proc.stderr and "export SPECEXP_ABSENT_KEY" in run.proc.stderr


def test_an_unreachable_endpoint_fails_in_one_line(specexp) -> None:
    # how fast: benchmarks/cli_start.py prints this command's wall time
    run = specexp("engine=external", "engine.url=http://127.0.0.1:9", "engine.model_name=x")
    assert run.proc.returncode == 2
    assert "engine.url" in run.proc.stderr and "does not answer" in run.proc.stderr
    assert "Traceback" not in run.proc.stderr


def test_a_model_the_endpoint_does_not_serve_is_refused_naming_what_it_serves(specexp, remote: str) -> None:
    run = specexp("engine=external", f"engine.url={remote}", "engine.model_name=other")
    assert run.proc.returncode == 2 and "serves remote-tiny, not 'other'" in run.proc.stderr
    assert "engine.model_name=remote-tiny" in run.proc.stderr and "Traceback" not in run.proc.stderr


def test_a_failed_points_traceback_goes_to_its_folder_the_console_gets_one_line(specexp_main) -> None:
    # issue 37: a failed external point printed a traceback on the console; a cut stream fails every request
    with serving(Endpoint(tokens=8, close=True)) as url:
        run = specexp_main(*CUT, f"engine.url={url}", "tracking.enabled=false")
    assert run.proc.returncode == 1
    printed = run.proc.stdout + run.proc.stderr  # the endpoint, in this process, may log its own tracebacks
    assert not re.search(r'File "[^"]*/specexp/', printed), printed  # no frame of specexp's
    (folder,) = (run.workdir / "run").rglob("traceback.txt")
    said = "point failed: RuntimeError: every measured request failed; first error: stream ended without [DONE]"
    (line,) = [line for line in run.proc.lines if "traceback in" in line]
    assert said in line and line.endswith(f"(traceback in {folder})")
    kept = folder.read_text()
    assert kept.startswith("Traceback (most recent call last):") and "RuntimeError: every measured request" in kept
