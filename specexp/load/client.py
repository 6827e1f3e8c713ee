"""The async streaming client: closed- or open-loop load, one record per request.

One event loop and one keep-alive connection pool. Closed loop: ``batch`` workers each keep one
request in flight until the prompts run out, so the server sees exactly ``batch`` concurrent
requests. Open loop: requests go out on an arrival schedule (specexp.load.arrivals) however many
are in flight, optionally capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from specexp.load.prompts import Prompt
from specexp.records import Chunk, RequestRecord


def fit_chunk_tokens(chunks: list[Chunk], total: int) -> None:
    """Spread a usage total over chunks that carried no token ids, by their share of the text.

    Engines that stream several tokens per event (speculation) without token ids would otherwise
    be counted one token per chunk; the largest-remainder split keeps the sum exact.
    """
    if not chunks or sum(c.tokens for c in chunks) == total:
        return
    weights = [max(len(c.text), 1) for c in chunks]
    scale = total / sum(weights)
    shares = [w * scale for w in weights]
    counts = [int(s) for s in shares]
    by_remainder = sorted(range(len(chunks)), key=lambda i: shares[i] - counts[i], reverse=True)
    for i in by_remainder[: total - sum(counts)]:
        counts[i] += 1
    for chunk, count in zip(chunks, counts, strict=True):
        chunk.tokens = count


async def stream_one(
    http: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    record: RequestRecord,
    observe: Callable[[dict[str, Any], RequestRecord], None],
) -> None:
    """Send one streamed completion and fill ``record`` as events arrive."""
    ids_seen = False
    try:
        async with http.post(url, json=body) as resp:
            if resp.status != 200:
                record.error = f"HTTP {resp.status}: {(await resp.text())[:500]}"
                return
            async for raw in resp.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                now = time.monotonic()
                event = json.loads(data)
                observe(event, record)
                if "error" in event:
                    record.error = f"stream error: {event['error']}"
                    return
                if event.get("usage"):
                    usage = event["usage"]
                    record.completion_tokens = usage.get("completion_tokens")
                    record.prompt_tokens = usage.get("prompt_tokens", record.prompt_tokens)
                for choice in event.get("choices") or []:
                    ids = choice.get("token_ids")
                    text = choice.get("text") or ""
                    if ids:
                        ids_seen = True
                        record.token_ids = [*(record.token_ids or []), *ids]
                    if text or ids:
                        record.chunks.append(Chunk(now, len(ids) if ids else 1, text))
                    record.finish_reason = choice.get("finish_reason") or record.finish_reason
    except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError, ValueError) as exc:
        record.error = f"{type(exc).__name__}: {exc}"
    finally:
        record.end = time.monotonic()
    if record.error is None and not record.chunks:
        record.error = "stream ended without output"
    if record.completion_tokens is not None:
        record.token_source = "usage"
        if not ids_seen:
            fit_chunk_tokens(record.chunks, record.completion_tokens)


async def run_closed_loop(
    http: aiohttp.ClientSession,
    url: str,
    prompts: list[Prompt],
    batch: int,
    body: dict[str, Any],
    observe: Callable[[dict[str, Any], RequestRecord], None],
    on_done: Callable[[RequestRecord], None] = lambda r: None,
    warmup: bool = False,
) -> list[RequestRecord]:
    """Send every prompt with ``batch`` requests in flight at all times; records in prompt order."""
    records: list[RequestRecord] = []
    queue = iter(enumerate(prompts))

    async def worker() -> None:
        for index, prompt in queue:
            record = RequestRecord(index=index, send=time.monotonic(), warmup=warmup)
            if isinstance(prompt, list):
                record.prompt_tokens = len(prompt)
            records.append(record)
            await stream_one(http, url, {**body, "prompt": prompt}, record, observe)
            on_done(record)

    await asyncio.gather(*(worker() for _ in range(min(batch, len(prompts)))))
    return sorted(records, key=lambda r: r.index)


async def run_open_loop(
    http: aiohttp.ClientSession,
    url: str,
    prompts: list[Prompt],
    arrivals: list[float],
    max_concurrency: int | None,
    body: dict[str, Any],
    observe: Callable[[dict[str, Any], RequestRecord], None],
    on_done: Callable[[RequestRecord], None] = lambda r: None,
) -> list[RequestRecord]:
    """Send prompt i at ``arrivals[i]`` seconds from now, whatever is in flight (an open loop); with
    ``max_concurrency``, an arrival waits in the client until fewer are in flight. Each record keeps
    its scheduled ``arrival`` beside its actual ``send``; records in prompt order."""
    gate = asyncio.Semaphore(max_concurrency) if max_concurrency else contextlib.nullcontext()
    records: list[RequestRecord] = []

    async def send(record: RequestRecord, prompt: Prompt) -> None:
        async with gate:
            record.send = time.monotonic()
            await stream_one(http, url, {**body, "prompt": prompt}, record, observe)
        on_done(record)

    start = time.monotonic()
    tasks = []
    for index, (prompt, offset) in enumerate(zip(prompts, arrivals, strict=True)):
        due = start + offset
        if (wait := due - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        record = RequestRecord(index=index, send=due, arrival=due)
        if isinstance(prompt, list):
            record.prompt_tokens = len(prompt)
        records.append(record)
        tasks.append(asyncio.create_task(send(record, prompt)))
    await asyncio.gather(*tasks)
    return records
