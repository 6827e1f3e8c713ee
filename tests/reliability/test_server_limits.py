"""Item 7, the other engines: a limit on running requests in engine.extra_args that is below the batch
specexp sizes the server for is refused in one line, exit 2, before any server starts; each engine's
own parser reads it (abbreviated, repeated, or from vLLM's --config file)."""

from __future__ import annotations

import os

import pytest

from specexp import checks
from specexp.config import Config, ConfigError
from specexp.engines import limits
from specexp.engines.sglang.adapter import LAUNCH_MODULE
from specexp.engines.vllm import SERVER_MODULE, VllmEngine
from tests.conftest import VLLM_PYTHON
from tests.engines.test_sglang_adapter import LIGHT_PYTHON as SGLANG_PYTHON
from tests.engines.test_sglang_adapter import needs_sglang
from tests.engines.test_vllm_engine import make_cfg, needs_vllm
from tests.reliability.test_input import one_line


def vllm_cfg(extra_args: list[str]) -> Config:
    """A vLLM point at batch 4 on the installed vLLM, with these extra server arguments."""
    return make_cfg(engine={"python": str(VLLM_PYTHON), "extra_args": extra_args}, batch=4)


@pytest.mark.vllm
@needs_vllm
def test_a_vllm_limit_below_the_batch_is_refused_before_any_server_starts(ws) -> None:
    run = ws.run(
        "engine=vllm_cpu", "drafter=none", "batch=4", "engine.extra_args=[--max-num-se,2]",  # argparse's abbreviation
        SPECEXP_VLLM_PYTHON=str(VLLM_PYTHON), timeout=300,
    )  # fmt: skip
    line = one_line(run)
    assert "engine.extra_args: --max-num-seqs resolves to 2 in the server's argv" in line, line
    assert "and this server is sized for 4 requests at once (batch)" in line
    assert "Fix: drop --max-num-seqs from engine.extra_args" in line and "or use a batch of at most 2" in line
    assert not (ws.outputs / "servers").exists(), "a server was started"
    assert not ws.engines()


@pytest.mark.sglang
@needs_sglang
def test_an_sglang_limit_below_the_batch_is_refused_before_any_server_starts(ws) -> None:
    run = ws.run(
        "engine=sglang", f"engine.python={SGLANG_PYTHON}", "drafter=none", "batch=4",
        "engine.extra_args=[--max-running,2]",  # not --max-running-requests by name: SGLang's parser reads it
        timeout=300,
    )  # fmt: skip
    line = one_line(run)
    assert "engine.extra_args: --max-running-requests resolves to 2 in the server's argv" in line, line
    assert "sized for 4 requests at once (batch)" in line
    assert not (ws.outputs / "servers").exists(), "a server was started"


@pytest.mark.sglang
@needs_sglang
def test_sglang_s_parser_keeps_the_last_copy_of_its_limit() -> None:
    argv = [str(SGLANG_PYTHON), "-m", LAUNCH_MODULE, "--model-path", "m", "--max-running-requests", "8"]
    (limit,) = limits.LIMITS["sglang"]
    assert limits.server_limits("sglang", [str(SGLANG_PYTHON)], argv, dict(os.environ)) == {limit: 8}
    later = [*argv, "--max-running-requests=3"]
    assert limits.server_limits("sglang", [str(SGLANG_PYTHON)], later, dict(os.environ)) == {limit: 3}


@pytest.mark.vllm
@needs_vllm
def test_vllm_s_parser_reads_its_config_file_and_its_admission_limit(tmp_path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("max_num_seqs: 16\nmax_num_queued_reqs: 3\n")
    cfg = vllm_cfg(["--config", str(config), "--max_num_active_seqs", "8"])
    engine = VllmEngine()
    command = engine.command(cfg, 8000)
    found = limits.server_limits("vllm", engine.python(cfg), command.argv, {**os.environ, **command.env})
    assert {lim.flag: v for lim, v in found.items()} == {
        "--max-num-seqs": 4,  # specexp's own flag on the command line wins over the file
        "--max-num-active-seqs": 8,
        "--max-num-queued-reqs": 3,
    }
    with pytest.raises(ConfigError, match=r"--max-num-queued-reqs resolves to 3 .* is refused with HTTP 503"):
        checks.check_server_limits(cfg, engine, command)
    fine = vllm_cfg(["--max-num-seqs", "8"])
    checks.check_server_limits(fine, engine, engine.command(fine, 8000))  # above the batch: accepted
    assert SERVER_MODULE in command.argv
