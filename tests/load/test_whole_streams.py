"""A stream is whole only if it ends as the protocol says: ``data: [DONE]``, a finish_reason, and with
``ignore_eos`` the forced token count. specexp's own client, in process, against a tiny endpoint on a
real socket that misbehaves in one way each (tests.load.endpoint; issue 37: a cut stream was ok)."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from specexp.config import WorkloadConfig
from specexp.load.client import run_closed_loop
from specexp.load.conversation import Conversation
from specexp.load.shape import request_shape
from specexp.metrics import requests
from specexp.records import RequestRecord
from tests.load.endpoint import SERVED, Endpoint, serving

FORCED = 32  # max_tokens, forced by ignore_eos


def drive(endpoint: Endpoint, ignore_eos: bool = True) -> list[RequestRecord]:
    """Four requests through specexp's closed loop at batch 2, asking for the served model."""
    shape = request_shape(WorkloadConfig(output_len=FORCED, ignore_eos=ignore_eos), SERVED, {})
    conversations = [Conversation((f"prompt {i}",)) for i in range(4)]

    async def run(base: str) -> list[RequestRecord]:
        async with aiohttp.ClientSession() as http:
            return await run_closed_loop(http, base, shape, conversations, 2, lambda e, r: None)

    with serving(endpoint) as base:
        return asyncio.run(run(base))


@pytest.mark.parametrize(
    ("endpoint", "reason"),
    [
        (Endpoint(tokens=16, close=True), f"stream ended without [DONE] after 16 of {FORCED} tokens"),
        (Endpoint(tokens=FORCED, done=False), f"stream ended without [DONE] after {FORCED} of {FORCED} tokens"),
        (
            Endpoint(tokens=FORCED, finish=None),
            f"stream ended without a finish_reason after {FORCED} of {FORCED} tokens",
        ),
        (
            Endpoint(tokens=16),
            f"stream ended (length) after 16 of {FORCED} tokens forced by ignore_eos (an endpoint "
            "that does not honour it needs workload.ignore_eos=false)",
        ),
    ],
    ids=["closed-half-way", "no-done", "no-finish-reason", "fewer-than-forced"],
)
def test_a_stream_that_does_not_end_as_the_protocol_says_is_a_failed_request(endpoint: Endpoint, reason: str) -> None:
    records = drive(endpoint)
    assert [r.error for r in records] == [reason] * 4
    metrics = requests.compute(records)
    assert metrics["requests_ok"] == 0 and metrics["requests_failed"] == 4  # so the point fails (specexp.point.job)
    assert "output_len_mean" not in metrics


def test_a_whole_stream_is_ok_and_records_its_finish_reason() -> None:
    records = drive(Endpoint(tokens=FORCED))
    assert all(r.ok and r.finish_reason == "length" and r.output_tokens == FORCED for r in records)
    assert all(r.model is None for r in records)  # the chunks named the model asked for
    assert json.loads(json.dumps(records[0].to_json()))["finish_reason"] == "length"  # as records.jsonl has it


def test_without_ignore_eos_a_short_answer_is_whole() -> None:
    records = drive(Endpoint(tokens=5, finish="stop"), ignore_eos=False)
    assert all(r.ok and r.finish_reason == "stop" and r.output_tokens == 5 for r in records)
    cut = drive(Endpoint(tokens=5, close=True), ignore_eos=False)
    assert {r.error for r in cut} == {"stream ended without [DONE] after 5 tokens"}


def test_chunks_that_name_another_model_are_recorded() -> None:
    records = drive(Endpoint(tokens=FORCED, model="someone-else"))
    assert all(r.ok and r.model == "someone-else" for r in records)
