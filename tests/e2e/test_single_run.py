"""`python -m specexp`: one point, every METRICS.md key, results on disk and in MLflow."""

import json

import pytest

from specexp.metrics.registry import lookup

CLIENT_KEYS = [
    "output_throughput",
    "request_throughput",
    "total_throughput",
    "decode_speed",
    "decode_excluded",
    "decode_speed_p50",
    "tokens_per_chunk_mean",
    "requests_ok",
    "requests_failed",
    "output_tokens",
    "input_tokens",
    "server_startup_s",
]
LATENCIES = [
    f"{k}_{s}"
    for k in ("ttft_ms", "tpot_ms", "itl_ms", "chunk_gap_ms", "e2e_ms")
    for s in ("mean", "p50", "p90", "p99")
]
SPEC_KEYS = ["accept_length", "accept_rate", "spec_verify_steps", "spec_draft_tokens", "spec_accepted_tokens"]
TAGS = [
    "specexp.sweep_id",
    "specexp.server_key",
    "specexp.server_reused",
    "specexp.status",
    "specexp.engine_version",
    "specexp.git_sha",
    "specexp.token_source",
    "specexp.hardware",
]


def test_the_registry_declares_every_key_we_check() -> None:
    """The metric registry and this test agree on the names (guards against silent renames)."""
    for key in CLIENT_KEYS + LATENCIES + SPEC_KEYS:
        assert lookup(key) is not None, key


def test_single_run_logs_every_metrics_key(specexp) -> None:
    run = specexp("drafter=tiny", "batch=2")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    results = json.loads((run.workdir / "run" / "results.json").read_text())
    assert results["status"] == "ok"
    runs = run.runs()
    assert len(runs) == 1
    logged = runs[0].data
    for key in CLIENT_KEYS + LATENCIES + SPEC_KEYS + ["accept_rate_pos_0", "accept_rate_pos_3"]:
        assert key in logged.metrics, key
        assert logged.metrics[key] == results["metrics"][key]
    # system/* are MLflow's own system metrics of the measured window, not specexp's
    undeclared = [k for k in logged.metrics if not k.startswith("system/") and lookup(k) is None]
    assert not undeclared, f"logged but not in the metric registry: {undeclared}"
    for tag in TAGS:
        assert tag in logged.tags, tag
    assert logged.tags["specexp.status"] == "ok" and logged.tags["specexp.server_reused"] == "false"
    assert logged.params["engine.name"] == "torch" and logged.params["batch"] == "2"
    assert logged.params["drafter.name"] == "tiny"
    m = logged.metrics
    steady = m["windows"]  # three by default, after any warm-up windows, each of 4 requests
    assert steady >= 3 and len(results["windows"]) == steady + m["windows_warmup"]
    assert m["requests_ok"] == 4 * steady and m["requests_failed"] == 0 and m["output_tokens"] == 4 * steady * 16
    assert m["output_throughput_ci95"] > 0 and m["client_cpu"] > 0 and m["host_load1"] >= 0
    records = [json.loads(line) for line in (run.workdir / "run" / "records.jsonl").read_text().splitlines()]
    assert sorted({r["window"] for r in records if r["window"] is not None}) == list(range(len(results["windows"])))
    # one definition (specexp.metrics.acceptance): 1 + accepted per verify step, from the measured
    # requests' own counts; every output token is a prefill token, an accepted draft or a step's own token
    measured = [r for r in records if not (r["warmup"] or r["filler"])]
    assert m["spec_verify_steps"] == sum(r["extra"]["spec_verify_ct"] for r in measured)
    assert m["spec_accepted_tokens"] + m["spec_verify_steps"] + m["requests_ok"] <= m["output_tokens"]
    for w in results["windows"]:  # per window: 1 + accepted per verify step (the point's: their mean)
        assert w["accept_length"] == pytest.approx(1 + w["spec_accepted_tokens"] / w["spec_verify_steps"])
    assert 1 < m["accept_length"] <= 5
    assert any(r["warmup"] and r["window"] is None for r in records)  # warm-up requests are kept, marked
    assert m["server_tpot_ms_mean"] > 0 and m["client_burst_share"] >= 0
    assert m.get("client_server_gap", 0) >= 0 and ("client_server_gap" in m or m["client_burst_share"] > 0.01)
    # the truth guard: speculation on random token ids (the default workload) is flagged synthetic
    assert logged.tags["specexp.workload_synthetic"] == "true"
    warning = "random token ids: the acceptance measured on them does not represent real traffic"
    assert warning in run.proc.stdout + run.proc.stderr  # Hydra logs to stdout
    assert not any("." in k for k in m if not k.startswith("crossover"))  # no per-category metrics
    artifacts = {a.path for a in run.mlflow.list_artifacts(runs[0].info.run_id)}
    assert {"config.yaml", "server.json", "server.log", "records.jsonl", "results.json"} <= artifacts


def test_dry_run_prints_argv_and_starts_nothing(specexp) -> None:
    run = specexp("dry_run=true", "+engine.env.HF_TOKEN=hf_secret_value")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    shown = json.loads(run.proc.stdout[run.proc.stdout.index("{") :])
    assert shown["argv"][1:3] == ["-m", "specexp.reference"]
    assert shown["env"]["HF_TOKEN"] == "***" and "hf_secret_value" not in run.proc.stdout
    assert run.runs() == []


def test_bad_input_fails_before_any_server_with_the_key(specexp) -> None:
    run = specexp("drafter=tiny", "drafter.topk=4")
    assert run.proc.returncode == 2
    assert "drafter.topk" in run.proc.stderr and "Fix:" in run.proc.stderr
    assert not (run.workdir / "run" / "results.json").exists()
