"""engine=external against a live reference engine the test starts: measured, never torn down,
its API key never written anywhere."""

import urllib.request

from specexp.server import serve_reference as serve

SECRET = "sk-test-0123456789abcdef"


def test_external_endpoint_is_measured_and_left_running(specexp, shared_outputs, tmp_path, monkeypatch) -> None:
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
    monkeypatch.setenv("SPECEXP_TEST_KEY", SECRET)
    with serve(args, tmp_path / "server.log") as url:
        run = specexp(
            "engine=external",
            f"engine.url={url}",
            "engine.model_name=remote-tiny",
            "engine.api_key_env=SPECEXP_TEST_KEY",
            "drafter=none",
            "batch=2",
        )
        assert run.proc.returncode == 0, run.proc.stderr[-3000:]
        with urllib.request.urlopen(url + "/health") as resp:  # still up: external servers are not ours
            assert resp.status == 200
    (logged,) = run.runs()
    m = logged.data.metrics
    assert logged.data.tags["specexp.acceptance"] == "measured"
    assert m["accept_length"] > 1 and 0 < m["accept_rate"] <= 1
    assert m["spec_accepted_tokens"] + m["spec_verify_steps"] == m["output_tokens"]
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
