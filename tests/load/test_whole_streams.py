"""A stream is whole only if it ends as the protocol says: ``data: [DONE]``, a finish_reason, and with
``ignore_eos`` the forced token count. specexp's own client, in process, against a tiny aiohttp server
on a real socket that misbehaves in one way each (issue 37: a cut stream was recorded ok)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from specexp.config import WorkloadConfig
from specexp.load.client import run_closed_loop
from specexp.load.conversation import Conversation
from specexp.load.shape import request_shape
from specexp.metrics import requests
from specexp.records import RequestRecord

FORCED = 32  # max_tokens, forced by ignore_eos


def event(model: str, choices: list[dict[str, Any]], **extra: Any) -> bytes:
    return b"data: " + json.dumps({"model": model, "choices": choices, **extra}).encode() + b"\n\n"


def endpoint(
    tokens: int = FORCED, done: bool = True, finish: str | None = "length", model: str = "tiny", close: bool = False
) -> web.Application:
    """A completions endpoint that streams ``tokens`` one per chunk, then (as told) a finish_reason,
    the usage chunk and ``[DONE]``; ``close``: it says ``Connection: close`` and ends half-way, with
    neither finish_reason, usage nor [DONE], as the endpoint of issue 37 did."""

    async def complete(request: web.Request) -> web.StreamResponse:
        await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        if close:
            resp.force_close()  # sends Connection: close
        await resp.prepare(request)
        for i in range(tokens):
            last = i == tokens - 1 and not close
            choice = {"index": 0, "text": "x", "token_ids": [i], "finish_reason": finish if last else None}
            await resp.write(event(model, [choice]))
        if not close:
            await resp.write(event(model, [], usage={"prompt_tokens": 3, "completion_tokens": tokens}))
            if done:
                await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", complete)
    return app


def drive(app: web.Application, ignore_eos: bool = True, requests_n: int = 4) -> list[RequestRecord]:
    """``requests_n`` requests through specexp's closed loop at batch 2, asking for model ``tiny``."""
    shape = request_shape(WorkloadConfig(output_len=FORCED, ignore_eos=ignore_eos), "tiny", {})
    conversations = [Conversation((f"prompt {i}",)) for i in range(requests_n)]

    async def run() -> list[RequestRecord]:
        async with TestServer(app, host="127.0.0.1") as server, aiohttp.ClientSession() as http:
            base = str(server.make_url("")).rstrip("/")
            return await run_closed_loop(http, base, shape, conversations, 2, lambda e, r: None)

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("app", "reason"),
    [
        (endpoint(tokens=FORCED // 2, close=True), f"stream ended without [DONE] after 16 of {FORCED} tokens"),
        (endpoint(done=False), f"stream ended without [DONE] after {FORCED} of {FORCED} tokens"),
        (endpoint(finish=None), f"stream ended without a finish_reason after {FORCED} of {FORCED} tokens"),
        (endpoint(tokens=FORCED // 2), f"stream ended (length) after 16 of {FORCED} tokens forced by ignore_eos"),
    ],
    ids=["closed-half-way", "no-done", "no-finish-reason", "fewer-than-forced"],
)
def test_a_stream_that_does_not_end_as_the_protocol_says_is_a_failed_request(app: web.Application, reason: str) -> None:
    records = drive(app)
    assert [r.error for r in records] == [reason] * 4
    metrics = requests.compute(records)
    assert metrics["requests_ok"] == 0 and metrics["requests_failed"] == 4  # so the point fails (specexp.point.job)
    assert "output_len_mean" not in metrics


def test_a_whole_stream_is_ok_and_records_its_finish_reason() -> None:
    records = drive(endpoint())
    assert all(r.ok and r.finish_reason == "length" and r.output_tokens == FORCED for r in records)
    assert all(r.model is None for r in records)  # the chunks named the model asked for
    assert json.loads(json.dumps(records[0].to_json()))["finish_reason"] == "length"  # as records.jsonl has it


def test_without_ignore_eos_a_short_answer_is_whole() -> None:
    records = drive(endpoint(tokens=5, finish="stop"), ignore_eos=False)
    assert all(r.ok and r.finish_reason == "stop" and r.output_tokens == 5 for r in records)
    cut = drive(endpoint(tokens=5, close=True), ignore_eos=False)
    assert {r.error for r in cut} == {"stream ended without [DONE] after 5 tokens"}


def test_chunks_that_name_another_model_are_recorded() -> None:
    records = drive(endpoint(model="someone-else"))
    assert all(r.ok and r.model == "someone-else" for r in records)
