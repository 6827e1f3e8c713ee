"""The async streaming client: closed- or open-loop load, one record per request.

One event loop and one keep-alive connection pool. Closed loop: ``batch`` workers each keep one
request in flight until the conversations run out, so the server sees exactly ``batch`` concurrent
requests; with ``fill`` conversations, a worker whose queue ran dry keeps sending those (recorded,
``filler``) until the last measured request ends, and the fillers still in flight are then cut, so the
window's last requests run under the same load as its first (no ramp-down). Open loop: conversations
start on an arrival schedule (specexp.load.arrivals) however many are in flight, optionally capped.
Either way a conversation's turns go one after the other, each with the model's answers so far in its
history (specexp.load.conversation). Completion and chat streams
are read alike: text from ``choices[].text`` or ``choices[].delta``. A stream is whole only if it ends
as the protocol says (``unfinished``); anything else is a failed request with the reason, never ok.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from specexp.load import progress
from specexp.load.conversation import Conversation
from specexp.load.shape import RequestShape
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


def choice_text(choice: dict[str, Any]) -> tuple[str, bool]:
    """A streamed choice's text and whether it is thinking: a completion's ``text``, or a chat delta's
    ``content``, else its ``reasoning_content`` (SGLang, older vLLM) or ``reasoning`` (newer vLLM)."""
    if "text" in choice:
        return choice.get("text") or "", False
    delta = choice.get("delta") or {}
    if delta.get("content"):
        return delta["content"], False
    thinking = delta.get("reasoning_content") or delta.get("reasoning") or ""
    return thinking, bool(thinking)


async def stream_one(
    http: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    record: RequestRecord,
    observe: Callable[[dict[str, Any], RequestRecord], None],
    clock: progress.Progress | None = None,
) -> None:
    """Send one streamed completion and fill ``record`` as events arrive; ``clock`` (else the phase's,
    specexp.load.progress) sees it in flight and every chunk arrive."""
    clock = clock or progress.current()
    with clock.request():
        await _stream(http, url, body, record, observe, clock)


async def _stream(
    http: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    record: RequestRecord,
    observe: Callable[[dict[str, Any], RequestRecord], None],
    clock: progress.Progress,
) -> None:
    ids_seen = done = False
    try:
        async with http.post(url, json=body) as resp:
            if resp.status != 200:
                record.error = f"HTTP {resp.status}: {(await resp.text())[:500]}"
                return
            async for raw in resp.content:
                clock.moved()
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    break
                now = time.monotonic()
                event = json.loads(data)
                observe(event, record)
                if (named := event.get("model")) and named != body.get("model"):
                    record.model = named
                if "error" in event:
                    record.error = f"stream error: {event['error']}"
                    return
                if event.get("usage"):
                    usage = event["usage"]
                    record.completion_tokens = usage.get("completion_tokens")
                    record.prompt_tokens = usage.get("prompt_tokens", record.prompt_tokens)
                for choice in event.get("choices") or []:
                    ids = choice.get("token_ids")
                    text, reasoning = choice_text(choice)
                    if ids:
                        ids_seen = True
                        record.token_ids = [*(record.token_ids or []), *ids]
                    if text or ids:
                        record.chunks.append(Chunk(now, len(ids) if ids else 1, text, reasoning))
                    record.finish_reason = choice.get("finish_reason") or record.finish_reason
    except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError, ValueError) as exc:
        record.error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, aiohttp.ClientConnectionError):  # refused, reset: is the engine still there?
            clock.lost_connection(record.error)
    finally:
        record.end = time.monotonic()
    if record.error is None and not record.chunks:
        record.error = "stream ended without output"
    if record.completion_tokens is not None:
        record.token_source = "usage"
        if not ids_seen:
            fit_chunk_tokens(record.chunks, record.completion_tokens)
    if record.error is None:
        record.error = unfinished(record, body, done, exact=ids_seen or record.completion_tokens is not None)


def unfinished(record: RequestRecord, body: dict[str, Any], done: bool, exact: bool) -> str | None:
    """Why a stream that raised nothing is still not whole, or None when it ended as the protocol says:
    ``data: [DONE]``, a finish_reason, and with ``ignore_eos`` the forced ``max_tokens``. An endpoint
    that closes the connection half-way (``Connection: close``) otherwise reads as a short answer.
    ``exact``: the token count came from the server (usage or token ids); one counted by chunks is
    only a lower bound (a chunk may carry several tokens), so it cannot prove a stream short."""
    got = record.output_tokens
    forced = body.get("max_tokens") if body.get("ignore_eos") else None
    of = f"{got} of {forced}" if forced else f"{got}"
    if not done:
        return f"stream ended without [DONE] after {of} tokens"
    if record.finish_reason is None:
        return f"stream ended without a finish_reason after {of} tokens"
    if forced and exact and got < forced:
        hint = "an endpoint that does not honour it needs workload.ignore_eos=false"
        return f"stream ended ({record.finish_reason}) after {of} tokens forced by ignore_eos ({hint})"
    return None


Send = Callable[[RequestRecord, dict[str, Any]], Awaitable[None]]


@dataclass
class Conversations:
    """The conversations of one phase, and how their requests are sent and recorded."""

    http: aiohttp.ClientSession
    url: str
    shape: RequestShape
    items: list[Conversation]
    observe: Callable[[dict[str, Any], RequestRecord], None]
    on_done: Callable[[RequestRecord], None]
    warmup: bool = False
    filler: bool = False  # requests that only keep the load up (specexp.metrics.requests leaves them out)
    # An open loop's start (monotonic s): each record keeps its arrival from it (extra ``arrival_s``),
    # which places it in a phase of a changing load (specexp.report.phases)
    start: float | None = None
    records: list[RequestRecord] = field(default_factory=list)
    # Request i is turn t of conversation c at i = Σ turns before c + t: the order one stream sends them.
    first_index: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.first_index = list(itertools.accumulate((len(c.turns) for c in self.items), initial=0))

    async def converse(self, number: int, send: Send, arrival: float | None = None) -> None:
        """Every turn of conversation ``number``, each after the answer to the one before; ``send``
        streams one request. A failed turn ends the conversation: the turns after it are recorded as
        failed, never sent (their history would miss an answer)."""
        conversation = self.items[number]
        answers: list[str] = []
        for turn, prompt in enumerate(conversation.turns):
            ready = time.monotonic() if arrival is None or turn else arrival
            record = RequestRecord(
                index=self.first_index[number] + turn,
                send=ready,
                arrival=None if arrival is None else ready,
                warmup=self.warmup,
                filler=self.filler,
                category=conversation.category,
                conversation=number,
                turn=turn,
                extra=dict(conversation.extra),
            )
            if self.start is not None:
                record.extra["arrival_s"] = ready - self.start
            self.records.append(record)
            if len(answers) < turn:
                record.end, record.error = record.send, f"not sent: turn {turn - 1} of this conversation failed"
            else:
                if isinstance(prompt, list):
                    record.prompt_tokens = len(prompt)
                await send(record, self.shape.body(conversation, turn, answers))
                if record.ok:
                    answers.append(record.text)
            self.on_done(record)

    async def stream(self, record: RequestRecord, body: dict[str, Any]) -> None:
        await stream_one(self.http, self.url, body, record, self.observe)

    def sorted_records(self) -> list[RequestRecord]:
        return sorted(self.records, key=lambda r: r.index)


CUT = "cut at the window's end (a filler)"


async def run_closed_loop(
    http: aiohttp.ClientSession,
    base_url: str,
    shape: RequestShape,
    conversations: list[Conversation],
    batch: int,
    observe: Callable[[dict[str, Any], RequestRecord], None],
    on_done: Callable[[RequestRecord], None] = lambda r: None,
    warmup: bool = False,
    fill: Sequence[Conversation] = (),
) -> list[RequestRecord]:
    """Send every conversation with ``batch`` requests in flight at all times; records in conversation
    and turn order, then the fillers (``fill``, cycled: see the module docstring), numbered after them."""
    url = base_url + shape.path
    phase = Conversations(http, url, shape, conversations, observe, on_done, warmup)
    fillers = Conversations(http, url, shape, list(fill), observe, lambda r: None, warmup, filler=True)
    queue = iter(range(len(conversations)))
    next_filler = itertools.cycle(range(len(fillers.items)))
    workers = min(batch, len(conversations))
    idle = 0  # workers whose share of the conversations is done
    measured_done = asyncio.Event()

    async def keep_loaded() -> None:
        while True:
            await fillers.converse(next(next_filler), fillers.stream)

    async def worker() -> None:
        nonlocal idle
        for number in queue:
            await phase.converse(number, phase.stream)
        idle += 1
        if idle == workers:
            measured_done.set()
        elif fillers.items:
            task = asyncio.ensure_future(keep_loaded())
            try:
                await measured_done.wait()
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    await asyncio.gather(*(worker() for _ in range(workers)))
    measured = phase.sorted_records()
    filled = sorted(fillers.records, key=lambda r: r.send)
    for number, record in enumerate(filled, start=len(measured)):
        record.index = number
        if record.error is None and record.finish_reason is None:
            record.error = CUT
    return [*measured, *filled]


async def run_open_loop(
    http: aiohttp.ClientSession,
    base_url: str,
    shape: RequestShape,
    conversations: list[Conversation],
    arrivals: list[float],
    max_concurrency: int | None,
    observe: Callable[[dict[str, Any], RequestRecord], None],
    on_done: Callable[[RequestRecord], None] = lambda r: None,
) -> list[RequestRecord]:
    """Start conversation i at ``arrivals[i]`` seconds from now, whatever is in flight (an open loop);
    its later turns follow its answers. With ``max_concurrency``, a request waits in the client until
    fewer are in flight. Each record keeps when it was ready (``arrival``: the schedule's time for a
    first turn, the previous answer's end for a later one) beside its actual ``send``."""
    gate = asyncio.Semaphore(max_concurrency) if max_concurrency else contextlib.nullcontext()
    phase = Conversations(http, base_url + shape.path, shape, conversations, observe, on_done)

    async def send(record: RequestRecord, body: dict[str, Any]) -> None:
        async with gate:
            record.send = time.monotonic()
            await phase.stream(record, body)

    start = phase.start = time.monotonic()
    tasks = []
    for number, offset in enumerate(arrivals):
        due = start + offset
        if (wait := due - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        tasks.append(asyncio.create_task(phase.converse(number, send, arrival=due)))
    await asyncio.gather(*tasks)
    return phase.sorted_records()
