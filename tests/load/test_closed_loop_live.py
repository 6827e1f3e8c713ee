"""The closed loop against the live reference engine: fillers keep ``batch`` requests in flight until
the window's last measured request ends, so its last requests run under the labelled load."""

from __future__ import annotations

import asyncio

import aiohttp

from specexp.config import WorkloadConfig
from specexp.load.client import CUT, run_closed_loop
from specexp.load.conversation import Conversation
from specexp.load.shape import request_shape
from specexp.metrics import requests, traffic
from specexp.records import RequestRecord
from tests.reference.conftest import LiveServer

BATCH = 4
# two requests per stream: each stream ends its share of the window when its second one ends
ITEMS = [Conversation(([7 + i] * 8,)) for i in range(8)]


def send(server: LiveServer, fill: list[Conversation]) -> list[RequestRecord]:
    shape = request_shape(WorkloadConfig(kind="random", output_len=24, ignore_eos=True), "tiny", {})

    async def go() -> list[RequestRecord]:
        async with aiohttp.ClientSession() as http:
            return await run_closed_loop(http, server.url, shape, ITEMS, BATCH, lambda e, r: None, fill=fill)

    return asyncio.run(go())


def in_flight_before_the_end(records: list[RequestRecord], before: float = 1e-4) -> int:
    """Requests in flight ``before`` seconds before the last measured request ended."""
    last = max(r.end for r in records if not r.filler)
    moment = last - before
    return sum(r.send <= moment < r.end for r in records)


def test_fillers_keep_the_batch_in_flight_to_the_windows_end(plain_server: LiveServer) -> None:
    records = send(plain_server, [Conversation(([3] * 8,)) for _ in range(BATCH)])
    measured = [r for r in records if not r.filler]
    fillers = [r for r in records if r.filler]
    assert [r.index for r in measured] == list(range(len(ITEMS))) and all(r.ok for r in measured)
    assert fillers and [r.index for r in fillers] == list(range(len(ITEMS), len(records)))
    # a filler's replacement goes out a moment after it ends: on a loaded host one instant can fall in
    # such a gap (2 of 4 in flight once, in the full suite), so the batch is full at some instant of
    # the last 10 ms, not necessarily at each
    assert max(in_flight_before_the_end(records, ms / 1e3) for ms in (0.1, 0.5, 1, 2, 5, 10)) == BATCH
    last = max(r.end for r in measured)
    assert all(r.error == CUT for r in fillers if r.end >= last)  # the ones still running were cut
    assert traffic.compute(records)["concurrency_max"] == BATCH
    assert requests.compute(records)["requests_ok"] == len(ITEMS)  # fillers are not the window's requests


def test_without_fillers_the_window_ramps_down(plain_server: LiveServer) -> None:
    records = send(plain_server, [])
    assert not any(r.filler for r in records)
    assert in_flight_before_the_end(records) < BATCH
