"""The measurement's own ceiling: how fast a stream can be before specexp's client distorts it.

An in-process synthetic server (this file, in a child process so that it does not share the
client's interpreter lock) streams OpenAI-style completions: the first chunk after --ttft-ms, then
a chunk of --tokens-per-chunk token ids every `gap` seconds, each event stamped with the server's
monotonic clock just before it is written (CLOCK_MONOTONIC is one clock for every process of a
Linux host, so the client's send time and the server's stamps compare directly). specexp's own
client (specexp.load.client.run_closed_loop, the code every point uses) drives it closed-loop.

For each concurrency the gap shrinks step by step (gap 0: as fast as the server can write); at
each step the client's TTFT and ITL (specexp.metrics' definitions) are compared with the same
metrics computed from the server's stamps. The ceiling at a concurrency is the highest chunk rate
(and token rate) at which the client's mean and median TTFT and ITL stay within --tolerance (1%)
of the server's. The client's TTFT error is the first chunk's delivery lag over the TTFT, so it
scales with --ttft-ms (100 ms: a large model's prefill under load); the lag column gives the
absolute figure (median of client arrival minus server stamp over every chunk). The CPU shares
(process CPU seconds / wall seconds) of the client and of the server are shown too.

    .venv/bin/python benchmarks/client_ceiling.py [--concurrency 1,2,4,...,512] [--tokens-per-chunk 4]
        [--chunks 64] [--ttft-ms 100] [--tolerance 0.01]

Figures only, not a test. On a small shared machine the server, the client and the neighbours
compete for cores: the ceiling is the whole host's, a lower bound for a quieter one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from aiohttp import web

from specexp.load.client import run_closed_loop
from specexp.load.conversation import Conversation
from specexp.load.shape import PATHS, RequestShape
from specexp.metrics.requests import itl_samples, ttft_s
from specexp.records import Chunk, RequestRecord

# asyncio sleeps no shorter than about a millisecond; 0 is as fast as the server can write.
GAPS_MS = (5.0, 2.0, 1.0, 0.0)
MIN_REQUESTS = 16  # per step, so that TTFT has enough samples at low concurrency


async def completions(request: web.Request) -> web.StreamResponse:
    """A streamed completion paced by the request's own ``gap_s``/``ttft_s`` fields."""
    body = await request.json()
    tokens, chunks = int(body["tokens_per_chunk"]), int(body["max_tokens"]) // int(body["tokens_per_chunk"])
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(b": headers now, not with the first chunk\n\n")  # an SSE comment; clients skip it
    await asyncio.sleep(float(body["ttft_s"]))
    for i in range(chunks):
        if i:
            await asyncio.sleep(float(body["gap_s"]))
        finish = "length" if i == chunks - 1 else None  # a whole stream ends with a finish_reason
        event = {
            "choices": [{"index": 0, "text": "x" * tokens, "token_ids": list(range(tokens)), "finish_reason": finish}],
            "server_t": time.monotonic(),
        }
        await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")
    usage = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": tokens * chunks}}
    await resp.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
    return resp


def serve(port: int) -> None:
    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=1024)


def record_server_stamp(event: dict[str, Any], record: RequestRecord) -> None:
    """specexp's observe hook: keep the server's stamp of every event that carries output."""
    if event.get("choices"):
        record.extra.setdefault("server_t", []).append(event["server_t"])


def server_view(record: RequestRecord) -> RequestRecord:
    """The same request with each chunk at the server's write time instead of the client's arrival."""
    stamps = record.extra["server_t"]
    chunks = [Chunk(t, c.tokens) for t, c in zip(stamps, record.chunks, strict=True)]
    return RequestRecord(index=record.index, send=record.send, end=stamps[-1], chunks=chunks)


@dataclass
class Step:
    concurrency: int
    gap_ms: float
    chunks_per_s: float
    tokens_per_s: float
    client_cpu: float  # share of one core
    server_cpu: float
    lag_ms: float  # median of (client arrival - server stamp) over every chunk
    errors: dict[str, float]  # relative error of the client's value against the server's

    @property
    def worst(self) -> float:
        return max(abs(v) for v in self.errors.values())


def relative_errors(records: list[RequestRecord]) -> dict[str, float]:
    """Client vs server: mean and median TTFT and ITL (token-normalised, as specexp defines them)."""
    server = [server_view(r) for r in records]
    out = {}
    for name, per_request in (("ttft", lambda r: [ttft_s(r)]), ("itl", itl_samples)):
        client_values = np.concatenate([per_request(r) for r in records])
        server_values = np.concatenate([per_request(r) for r in server])
        for stat, fn in (("mean", np.mean), ("p50", np.median)):
            reference = fn(server_values)
            out[f"{name}_{stat}"] = float((fn(client_values) - reference) / reference)
    return out


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU seconds (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def step(url: str, server_pid: int, concurrency: int, gap_ms: float, args: argparse.Namespace) -> Step:
    base = {
        "model": "synthetic",
        "stream": True,
        "max_tokens": args.tokens_per_chunk * args.chunks,
        "tokens_per_chunk": args.tokens_per_chunk,
        "gap_s": gap_ms / 1e3,
        "ttft_s": args.ttft_ms / 1e3,
    }
    shape = RequestShape(PATHS["completions"], "completions", base)
    prompts = [Conversation((f"p{i}",)) for i in range(max(MIN_REQUESTS, concurrency * args.rounds))]
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as http:
        warm = prompts[:concurrency]
        await run_closed_loop(http, url, shape, warm, concurrency, record_server_stamp, warmup=True)
        wall, cpu, server_cpu = time.monotonic(), time.process_time(), cpu_seconds(server_pid)
        records = await run_closed_loop(http, url, shape, prompts, concurrency, record_server_stamp)
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        server_cpu = cpu_seconds(server_pid) - server_cpu
    failed = [r.error for r in records if not r.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} request(s) failed, first: {failed[0]}")
    chunks = sum(len(r.chunks) for r in records)
    tokens = sum(r.output_tokens for r in records)
    lag = np.median([c.t - t for r in records for c, t in zip(r.chunks, r.extra["server_t"], strict=True)])
    return Step(
        concurrency,
        gap_ms,
        chunks / wall,
        tokens / wall,
        cpu / wall,
        server_cpu / wall,
        lag * 1e3,
        relative_errors(records),
    )


async def sweep(url: str, server_pid: int, args: argparse.Namespace) -> list[tuple[int, Step | None, Step]]:
    """Per concurrency: the fastest passing step (None if even the slowest fails) and the first failing one."""
    out = []
    for concurrency in args.concurrency:
        passed, last = None, None
        for gap in GAPS_MS:
            last = await step(url, server_pid, concurrency, gap, args)
            print(
                f"  c={concurrency:<4d} gap {gap:5.2f} ms: {last.chunks_per_s:9,.0f} chunks/s "
                f"{last.tokens_per_s:10,.0f} tok/s  CPU client {last.client_cpu:4.0%} server {last.server_cpu:4.0%}  "
                f"lag {last.lag_ms:.2f} ms  " + "  ".join(f"{k} {v:+.2%}" for k, v in last.errors.items()),
                flush=True,
            )
            if last.worst > args.tolerance:
                break
            passed = last
        assert last is not None
        out.append((concurrency, passed, last))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", default="1,2,4,8,16,32,64,128,256,512")
    parser.add_argument("--tokens-per-chunk", type=int, default=4)
    parser.add_argument("--chunks", type=int, default=64, help="chunks per request")
    parser.add_argument("--rounds", type=int, default=2, help="requests per worker")
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--tolerance", type=float, default=0.01)
    args = parser.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    port = free_port()
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(port,), daemon=True)
    server.start()
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        results = asyncio.run(sweep(url, server.pid, args))
    finally:
        server.terminate()
        server.join(10)
    print(
        f"\nceiling: the fastest step at which the client's TTFT and ITL (mean, median) stay within "
        f"{args.tolerance:.0%} of the server's stamps ({args.tokens_per_chunk} tokens per chunk)"
    )
    print(
        f"{'concurrency':>11}  {'chunks/s':>9}  {'tokens/s':>9}  {'client CPU':>10}  {'server CPU':>10}  "
        "first failing step"
    )
    for concurrency, passed, failed in results:
        ok = (
            f"{passed.chunks_per_s:9,.0f}  {passed.tokens_per_s:9,.0f}  "
            f"{passed.client_cpu:10.0%}  {passed.server_cpu:10.0%}"
            if passed
            else f"{'-':>9}  {'-':>9}  {'-':>10}  {'-':>10}"
        )
        worst = max(failed.errors, key=lambda k: abs(failed.errors[k]))
        tail = (
            f"{failed.chunks_per_s:,.0f} chunks/s: {worst} {failed.errors[worst]:+.1%}"
            if failed.worst > args.tolerance
            else "none (gap 0 passed)"
        )
        print(f"{concurrency:>11}  {ok}  {tail}")


if __name__ == "__main__":
    main()
