"""Chat with SGLang, checked against its sources: the request fields specexp sends are fields SGLang
0.5.23 declares (its pydantic models drop unknown ones silently), and its chat stream, thinking and
per-request acceptance included, reads into the same record as a completion stream."""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from specexp.config import WorkloadConfig
from specexp.engines.sglang import SglangEngine
from specexp.load.client import stream_one
from specexp.load.conversation import Conversation
from specexp.load.shape import request_shape
from specexp.metrics.acceptance import acceptance_metrics
from specexp.records import RequestRecord
from tests.engines.test_sglang_adapter import LIGHT_PYTHON, needs_sglang

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sglang" / "chat_stream_eagle3.json"
ENGINE = SglangEngine()


def protocol_fields(*classes: str) -> set[str]:
    """Annotated fields of SGLang's request models (and their bases in the same file), read from the
    installed protocol.py without importing it (the light venv lacks its runtime dependencies)."""
    site = next(LIGHT_PYTHON.parent.parent.glob("lib/python*/site-packages"))
    tree = ast.parse((site / "sglang/srt/entrypoints/openai/protocol.py").read_text())
    models = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    fields: set[str] = set()
    todo = list(classes)
    while todo:
        node = models[todo.pop()]
        fields |= {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        todo += [b.id for b in node.bases if isinstance(b, ast.Name) and b.id in models]
    return fields


@pytest.mark.sglang
@needs_sglang
@pytest.mark.parametrize(("api", "model"), [("chat", "ChatCompletionRequest"), ("completions", "CompletionRequest")])
def test_every_field_sent_is_one_sglang_declares(make_config, api: str, model: str) -> None:
    cfg = make_config("engine=sglang", "drafter=ttt5", "workload=random")
    workload = WorkloadConfig(kind="builtin", api=api, ignore_eos=False)
    body = request_shape(workload, cfg.model.api_name, ENGINE.request_fields(cfg)).body(Conversation(("hi",)), 0, [])
    assert set(body) <= protocol_fields(model), set(body) - protocol_fields(model)
    assert set(body["stream_options"]) <= protocol_fields("StreamOptions")
    assert body["return_spec_tokens_details"] is True
    assert "return_token_ids" not in body  # 0.5.23 refuses it on streamed chat (serving_chat.py)


def test_a_chat_stream_reads_into_the_record() -> None:
    events = json.loads(FIXTURE.read_text())["events"]
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"

    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=sse, content_type="text/event-stream")

    async def run() -> RequestRecord:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        record = RequestRecord(index=0, send=0.0)
        async with TestServer(app) as server, aiohttp.ClientSession() as http:
            url = str(server.make_url("/v1/chat/completions"))
            await stream_one(http, url, {"messages": []}, record, ENGINE.observe)
        return record

    record = asyncio.run(run())
    assert record.ok and record.finish_reason == "length"
    assert record.completion_tokens == 32 and sum(c.tokens for c in record.chunks) == 32  # usage, spread by text
    assert len(record.chunks) == 5 and [c.reasoning for c in record.chunks] == [True, True, False, False, False]
    assert record.text == "Waves fold into foam,\nsalt wind carries"  # the answer, thinking left out
    counts = acceptance_metrics(ENGINE.acceptance(None, None, [record]))
    assert counts["spec_verify_steps"] == 10 and counts["accept_rate"] == pytest.approx(22 / 30)
