"""/v1/chat/completions on the live reference engine: the model's chat template as Hugging Face applies
it, the same tokens and counters as /v1/completions on the templated ids, and per-request acceptance
that adds up to the counters."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from transformers import AutoTokenizer

from specexp.engines.counters import delta
from specexp.models.tiny import TinyPaths
from tests.reference.client import run, scrape
from tests.reference.conftest import LiveServer

GREEDY = {"temperature": 0, "ignore_eos": True, "max_tokens": 40}
CONVERSATION = [
    {"role": "system", "content": "You write Python."},
    {"role": "user", "content": "Write a function that adds two numbers."},
    {"role": "assistant", "content": "def add(a, b):\n    return a + b"},
    {"role": "user", "content": "Now one that multiplies them."},
]


async def events(http: aiohttp.ClientSession, url: str, path: str, **body: Any) -> list[dict[str, Any]]:
    body = {"model": "tiny", "stream": True, "stream_options": {"include_usage": True}, **body}
    async with http.post(url + path, json=body) as resp:
        raw = (await resp.read()).decode()
        assert resp.status == 200, raw
    frames = raw.split("\n\n")
    assert frames[-2:] == ["data: [DONE]", ""]
    return [json.loads(f.removeprefix("data: ")) for f in frames[:-2]]


def counters(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The counters' deltas (the gauges of running and waiting requests, and the latency histograms, left out)."""
    d = delta(before, after)
    return {k: v for k, v in d.items() if not k.startswith("num_requests_") and not k.endswith(("_sum", "_count"))}


def output_ids(stream: list[dict[str, Any]]) -> list[int]:
    return [t for e in stream for c in e["choices"] for t in c.get("token_ids") or []]


def hf_template_ids(tiny: TinyPaths, messages: list[dict[str, str]]) -> list[int]:
    """The prompt as Hugging Face (and so vLLM) renders it from the checkpoint's tokenizer_config.json."""
    tokenizer = AutoTokenizer.from_pretrained(str(tiny.target))
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"])


def test_chat_and_completions_give_the_same_tokens_and_counters(draft_server: LiveServer, tiny: TinyPaths) -> None:
    async def go(http: aiohttp.ClientSession):
        windows = []
        chat = await events(
            http, draft_server.url, "/v1/chat/completions", messages=CONVERSATION, return_token_ids=True, **GREEDY
        )
        for path, body in (
            ("/v1/chat/completions", {"messages": CONVERSATION}),
            ("/v1/completions", {"prompt": chat[0]["prompt_token_ids"]}),
        ):
            before = await scrape(http, draft_server.url)
            stream = await events(http, draft_server.url, path, **body, **GREEDY)
            windows.append((stream, counters(before, await scrape(http, draft_server.url))))
        return chat, windows

    chat, [(chat_stream, chat_counters), (completion_stream, completion_counters)] = run(go)
    assert chat[0]["prompt_token_ids"] == hf_template_ids(tiny, CONVERSATION)
    assert output_ids(chat_stream) == output_ids(completion_stream) and len(output_ids(chat_stream)) == 40
    assert chat_stream[-1]["usage"] == completion_stream[-1]["usage"]
    assert chat_counters == completion_counters and chat_counters["spec_decode_num_draft_tokens"] > 0
    chat_text = "".join(c["delta"].get("content", "") for e in chat_stream for c in e["choices"])
    assert chat_text == "".join(c["text"] for e in completion_stream for c in e["choices"])


def test_chat_stream_and_response_have_openai_shapes(plain_server: LiveServer) -> None:
    async def go(http: aiohttp.ClientSession):
        stream = await events(http, plain_server.url, "/v1/chat/completions", messages=CONVERSATION[1:2], **GREEDY)
        body = {"model": "tiny", "messages": CONVERSATION[1:2], **GREEDY}
        async with http.post(plain_server.url + "/v1/chat/completions", json=body) as resp:
            return stream, await resp.json()

    stream, whole = run(go)
    first, *chunks, usage = stream
    assert first["object"] == "chat.completion.chunk" and first["id"].startswith("chatcmpl-")
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all("content" in c["choices"][0]["delta"] for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 40
    assert whole["object"] == "chat.completion"
    message = whole["choices"][0]["message"]
    assert message["role"] == "assistant"
    assert message["content"] == "".join(c["choices"][0]["delta"]["content"] for c in chunks)
    assert whole["usage"] == usage["usage"]


@pytest.mark.parametrize(
    "body",
    [
        {"messages": []},
        {"messages": "hello"},
        {"messages": [{"content": "no role"}]},
        {"messages": [{"role": "user", "content": 5}]},
        {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
        {"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0},
    ],
)
def test_bad_chat_requests_get_400(plain_server: LiveServer, body: dict) -> None:
    async def go(http: aiohttp.ClientSession):
        async with http.post(plain_server.url + "/v1/chat/completions", json={"model": "tiny", **body}) as resp:
            return resp.status, await resp.json()

    status, payload = run(go)
    assert status == 400 and payload["error"]["code"] == 400


def test_content_parts_read_as_text(plain_server: LiveServer) -> None:
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]}]
    joined = [{"role": "user", "content": "Hello\nthere"}]

    async def go(http: aiohttp.ClientSession):
        return [
            (await events(http, plain_server.url, "/v1/chat/completions", messages=m, **GREEDY))[-1]["usage"]
            for m in (parts, joined)
        ]

    a, b = run(go)
    assert a == b


def test_per_request_acceptance_adds_up_to_the_counters(draft_server: LiveServer) -> None:
    """Concurrent chat and completion streams, greedy and sampled, some stopping at EOS: the requests'
    spec_tokens_details sum exactly to the window's counter deltas."""

    def body(i: int) -> tuple[str, dict[str, Any]]:
        sampling = {"max_tokens": 12 + i, "temperature": 0.0 if i % 2 else 0.8, "seed": i, "ignore_eos": i % 3 != 0}
        if i % 2:
            return "/v1/completions", {"prompt": f"for i in range({i}):", **sampling}
        return "/v1/chat/completions", {"messages": [{"role": "user", "content": f"Count to {i}."}], **sampling}

    async def work(http: aiohttp.ClientSession):
        before = await scrape(http, draft_server.url)
        streams = await asyncio.gather(
            *(
                events(http, draft_server.url, path, return_spec_tokens_details=True, **b)
                for path, b in map(body, range(12))
            )
        )
        return streams, delta(before, await scrape(http, draft_server.url))

    streams, d = run(work)
    details = []
    for stream in streams:
        *_, ext, usage = stream
        assert ext["choices"] == [] and usage["choices"] == []
        spec = ext["sglext"]["spec_tokens_details"]
        completion = usage["usage"]["completion_tokens"]
        # one prefill step, then verify steps (and steps that drafted nothing), each emitting accepted + 1
        assert spec["spec_num_correct_drafts"] + spec["spec_verify_ct"] < completion
        assert spec["spec_accept_length"] == pytest.approx(completion / spec["spec_verify_ct"])  # SGLang's ratio
        details.append(spec)
    assert sum(s["spec_verify_ct"] for s in details) == d["spec_decode_num_drafts"]
    assert sum(s["spec_num_correct_drafts"] for s in details) == d["spec_decode_num_accepted_tokens"]
    assert sum(s["spec_num_proposed_drafts"] for s in details) == d["spec_decode_num_draft_tokens"] > 0
    for i in range(len(details[0]["spec_accepted_per_pos"])):
        assert sum(s["spec_accepted_per_pos"][i] for s in details) == d[f"spec_decode_num_accepted_tokens_per_pos[{i}]"]
