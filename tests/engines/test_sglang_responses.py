"""SGLang response parsing on fixtures written from SGLang 0.5.23's source (tests/fixtures/sglang)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from specexp.engines.sglang import SglangEngine
from specexp.metrics.acceptance import acceptance_metrics
from specexp.records import RequestRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang"
ENGINE = SglangEngine()


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def streamed(warmup: bool = False) -> list[RequestRecord]:
    """Records as the streaming client leaves them: usage tokens, then every event shown to observe()."""
    records = []
    for i, request in enumerate(fixture("completions_stream_eagle3.json")["requests"]):
        record = RequestRecord(index=i, send=0.0, completion_tokens=request["completion_tokens"], warmup=warmup)
        for event in request["events"]:
            ENGINE.observe(event, record)
        records.append(record)
    return records


def test_observe_keeps_spec_fields_from_the_sglext_chunk():
    first = streamed()[0]
    assert first.extra["spec_verify_ct"] == 19
    assert first.extra["spec_num_correct_drafts"] == 44
    assert first.extra["spec_num_proposed_drafts"] == 57
    assert first.extra["spec_accept_length"] == pytest.approx(64 / 19)


def test_acceptance_sums_over_measured_requests():
    out = acceptance_metrics(ENGINE.acceptance(None, None, streamed() + streamed(warmup=True)))
    assert out["spec_verify_steps"] == 19 + 25
    # specexp's definition: 1 + accepted per verify step (SGLang's own 128 / 44 counts the prefill token)
    assert out["accept_length"] == pytest.approx(1 + 82 / 44)
    assert (out["spec_accepted_tokens"], out["spec_draft_tokens"]) == (44 + 38, 57 + 75)
    assert out["accept_rate"] == pytest.approx(82 / 132)


def test_failed_and_plain_requests_do_not_count():
    records = streamed()
    records[1].error = "timeout"
    records.append(RequestRecord(index=9, send=0.0, completion_tokens=64))
    assert acceptance_metrics(ENGINE.acceptance(None, None, records))["accept_length"] == pytest.approx(1 + 44 / 19)


def test_without_correct_drafts_accepted_comes_from_the_tokens():
    records = streamed()
    for r in records:
        del r.extra["spec_num_correct_drafts"]
    out = acceptance_metrics(ENGINE.acceptance(None, None, records))
    # each request: one prefill token, then (accepted + 1) per verify step: the same 82 accepted
    assert out["spec_accepted_tokens"] == 82 and out["accept_length"] == pytest.approx(1 + 82 / 44)


def test_counter_fallback_from_metrics_deltas():
    m = fixture("metrics_spec.json")
    records = streamed()
    for r in records:
        r.extra.clear()
    out = acceptance_metrics(ENGINE.acceptance(*(metrics(m[k]) for k in ("before", "after")), records))
    # 512 tokens: one prefill token for each of the window's 2 finished requests, the rest 160 verify steps
    accepted = 512 - 2 - 160
    assert out == {
        "spec_verify_steps": 160.0,
        "spec_accepted_tokens": accepted,
        "accept_length": pytest.approx(1 + accepted / 160),
    }


def test_the_request_counter_counts_prefills_where_the_server_has_it():
    before = {"generation_tokens": 0.0, "spec_verify_calls": 0.0, "num_requests": 0.0}
    after = {"generation_tokens": 512.0, "spec_verify_calls": 160.0, "num_requests": 8.0}
    out = acceptance_metrics(ENGINE.acceptance(before, after, []))
    assert out["accept_length"] == pytest.approx(1 + (512 - 8 - 160) / 160)


def test_no_acceptance_without_fields_or_counters():
    assert ENGINE.acceptance(None, None, [RequestRecord(index=0, send=0.0, completion_tokens=8)]) is None
    assert ENGINE.acceptance({}, {}, []) is None


def respond(body: Any) -> Any:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=body) if isinstance(body, str) else web.json_response(body)

    return handler


def serve(routes: dict[str, Any], call: str) -> Any:
    """Run ``call`` (an engine coroutine method name) against a local server answering ``routes``."""

    async def run() -> Any:
        app = web.Application()
        for path, body in routes.items():
            app.router.add_get(path, respond(body))
        async with TestServer(app) as server, aiohttp.ClientSession() as http:
            return await getattr(ENGINE, call)(http, str(server.make_url("")).rstrip("/"))

    return asyncio.run(run())


def metrics(text: str) -> dict[str, float] | None:
    return serve({"/metrics": text}, "read_counters")


def test_read_counters_keeps_the_two_counters():
    assert metrics(fixture("metrics_spec.json")["after"]) == {"generation_tokens": 1640.0, "spec_verify_calls": 560.0}


def test_read_counters_without_metrics_endpoint():
    assert serve({}, "read_counters") is None


@pytest.mark.parametrize("path", ["/server_info", "/get_server_info"])
def test_server_info_with_fallback(path):
    info = fixture("server_info.json")
    got = serve({path: info}, "server_info")
    assert got["num_continuous_decode_steps"] == 4 and got["version"] == "0.5.23"


def test_server_info_absent():
    assert serve({}, "server_info") is None
