"""One acceptance definition (specexp.metrics.acceptance): the same counts give the same numbers
whichever engine reported them and however (vLLM's /metrics, the reference engine's /metrics and its
per-request fields, SGLang's per-request fields and its counters). The counts are vLLM's own, captured
by scripts/capture_vllm_fixtures.py (tests/fixtures/vllm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specexp.engines import counters
from specexp.engines.sglang import SglangEngine
from specexp.engines.sglang import spec_counts as sglang_acceptance
from specexp.engines.torch import TorchEngine
from specexp.engines.vllm import VllmEngine
from specexp.metrics import server
from specexp.metrics.acceptance import acceptance_metrics
from specexp.records import RequestRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm"
REQUESTS = 4  # each capture: 4 requests of 128 tokens (captures.json)


def vllm_text(name: str) -> str:
    return (FIXTURES / f"metrics_{name}.txt").read_text()


def split(total: float, parts: int = REQUESTS) -> list[int]:
    """``total`` over ``parts`` requests, as evenly as integers go."""
    base, extra = divmod(int(total), parts)
    return [base + (i < extra) for i in range(parts)]


def per_request(after: dict[str, float], with_positions: bool) -> list[RequestRecord]:
    """The capture's counts as SGLang's per-request events would carry them (the reference engine's
    also carry the per-position counts), shown to the adapter's observe()."""
    positions = sorted(k for k in after if k.startswith(counters.ACCEPTED_PER_POS + "["))
    columns = [split(after[k]) for k in positions]
    records = []
    fields = zip(
        split(after[counters.DRAFTS]), split(after[counters.ACCEPTED]), split(after[counters.DRAFT_TOKENS]), strict=True
    )
    for i, (steps, accepted, proposed) in enumerate(fields):
        details = {"spec_verify_ct": steps, "spec_num_correct_drafts": accepted, "spec_num_proposed_drafts": proposed}
        if with_positions:
            details["spec_accepted_per_pos"] = [column[i] for column in columns]
        record = RequestRecord(index=i, send=0.0, completion_tokens=128)
        SglangEngine().observe({"choices": [], "sglext": {"spec_tokens_details": details}}, record)
        records.append(record)
    return records


@pytest.mark.parametrize("name", ["draft", "eagle3", "ngram"])
def test_the_same_counts_give_the_same_numbers_on_every_engine(name: str) -> None:
    after = counters.parse(vllm_text(name), "vllm:")
    vllm = acceptance_metrics(VllmEngine().acceptance({}, after, []))
    assert vllm["accept_length"] == pytest.approx(1 + after[counters.ACCEPTED] / after[counters.DRAFTS])
    assert vllm["accept_rate_pos_0"] == pytest.approx(after[counters.ACCEPTED_PER_POS + "[0]"] / after[counters.DRAFTS])
    reference_counters = counters.parse(vllm_text(name).replace("vllm:", "specexp:"), "specexp:")
    assert acceptance_metrics(TorchEngine().acceptance({}, reference_counters, [])) == vllm
    assert acceptance_metrics(TorchEngine().acceptance(None, None, per_request(after, True))) == vllm
    sglang = acceptance_metrics(SglangEngine().acceptance(None, None, per_request(after, False)))
    assert sglang == {k: v for k, v in vllm.items() if not k.startswith("accept_rate_pos_")}  # SGLang has none


def test_sglang_counters_agree_where_every_decode_step_drafts() -> None:
    # EAGLE-3 on vLLM drafts at every decode step: 512 tokens = 4 prefills + accepted + verify steps, the
    # identity SGLang's counters are read with
    after = counters.parse(vllm_text("eagle3"), "vllm:")
    assert after["generation_tokens"] == REQUESTS + after[counters.ACCEPTED] + after[counters.DRAFTS]
    sglang_after = {"generation_tokens": 512.0, "spec_verify_calls": after[counters.DRAFTS], "num_requests": 4.0}
    zeros = dict.fromkeys(sglang_after, 0.0)
    got = acceptance_metrics(sglang_acceptance.counter_counts(zeros, sglang_after, 0))
    vllm = acceptance_metrics(VllmEngine().acceptance({}, after, []))
    assert got["accept_length"] == pytest.approx(vllm["accept_length"])


def test_the_server_latency_means_are_read_from_the_histograms() -> None:
    after = counters.parse(vllm_text("eagle3"), "vllm:")
    means = server.latency({}, after)
    ttft = after["time_to_first_token_seconds_sum"] / after["time_to_first_token_seconds_count"] * 1e3
    assert means["server_ttft_ms_mean"] == pytest.approx(ttft)
    assert set(means) == {"server_ttft_ms_mean", "server_tpot_ms_mean", "server_e2e_ms_mean", "server_queue_ms_mean"}
    assert server.latency(after, after) == {}  # no request finished between the scrapes
