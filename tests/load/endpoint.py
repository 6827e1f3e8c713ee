"""A tiny OpenAI-style completions endpoint on a real socket (127.0.0.1, a free port) that streams as
the reference engine does, or misbehaves in one way as it is told: for the client's and the point's
tests of what a whole stream is (issue 37), with no engine to launch."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web

SERVED = "tiny"  # the name it lists on /v1/models


@dataclass
class Endpoint:
    """Streams ``tokens`` one per chunk naming ``model``, then the finish_reason ``finish`` on the last
    choice, the usage chunk and (``done``) ``data: [DONE]``. ``close``: it says ``Connection: close`` and
    ends after the ``tokens`` with neither finish_reason, usage nor [DONE] (issue 37's endpoint).
    ``answer``: requests after that many wait forever; ``counted``: /metrics waits forever from that
    read on (None: never)."""

    tokens: int = 16
    model: str = SERVED
    finish: str | None = "length"
    done: bool = True
    close: bool = False
    answer: int | None = None
    counted: int | None = None
    requests: int = 0
    reads: int = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/completions", self.complete)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/v1/models", lambda _: web.json_response({"data": [{"id": SERVED, "object": "model"}]}))
        return app

    async def complete(self, request: web.Request) -> web.StreamResponse:
        await request.json()
        self.requests += 1
        if self.answer is not None and self.requests > self.answer:
            await asyncio.sleep(3600)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        if self.close:
            resp.force_close()  # Connection: close
        await resp.prepare(request)
        for i in range(self.tokens):
            last = i == self.tokens - 1 and not self.close
            choice = {"index": 0, "text": "x", "token_ids": [i], "finish_reason": self.finish if last else None}
            await resp.write(self.event([choice]))
        if not self.close:
            await resp.write(self.event([], usage={"prompt_tokens": 16, "completion_tokens": self.tokens}))
            if self.done:
                await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    def event(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return b"data: " + json.dumps({"model": self.model, "choices": choices, **extra}).encode() + b"\n\n"

    async def metrics(self, request: web.Request) -> web.Response:
        self.reads += 1
        if self.counted is not None and self.reads >= self.counted:
            await asyncio.sleep(3600)
        return web.Response(text=f"specexp:num_requests_total {self.requests}\n")


@contextmanager
def serving(endpoint: Endpoint) -> Iterator[str]:
    """``endpoint`` served on 127.0.0.1 from a thread of its own (so a caller's own event loop, or the
    app's, can drive it); its base URL. Requests left waiting are cut when the block ends."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def call(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    runner = web.AppRunner(endpoint.app(), shutdown_timeout=0.5)
    call(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    call(site.start())
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        call(runner.cleanup())
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
