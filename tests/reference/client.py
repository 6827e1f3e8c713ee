"""Client helpers for the live-server tests: requests, streams, metric scrapes, a distribution check."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import aiohttp
from scipy.stats import chi2_contingency

from specexp.engines.counters import parse

K = 3  # draft chain length of the speculative test servers

PROMPTS = [
    "def main(argv):\n    ",
    "The quick brown fox",
    "import os\nimport sys\n",
    "class Foo(object):",
    "for i in range(10):",
    "Once upon a time",
    "x = [1, 2, 3]",
    "return self._value",
]


async def complete(http: aiohttp.ClientSession, url: str, **body: Any) -> dict[str, Any]:
    async with http.post(url + "/v1/completions", json={"model": "tiny", **body}) as resp:
        payload = await resp.json()
        assert resp.status == 200, payload
        return payload


async def stream(http: aiohttp.ClientSession, url: str, **body: Any) -> list[dict[str, Any]]:
    """All events of a streamed completion, checking the SSE framing and the closing [DONE]."""
    body = {"model": "tiny", "stream": True, "stream_options": {"include_usage": True}, **body}
    events: list[dict[str, Any]] = []
    async with http.post(url + "/v1/completions", json=body) as resp:
        assert resp.status == 200
        raw = (await resp.read()).decode()
    chunks = raw.split("\n\n")
    assert chunks[-2:] == ["data: [DONE]", ""], raw[-200:]
    for chunk in chunks[:-2]:
        assert chunk.startswith("data: "), chunk
        events.append(json.loads(chunk[len("data: ") :]))
    return events


async def scrape(http: aiohttp.ClientSession, url: str) -> dict[str, float]:
    async with http.get(url + "/metrics") as resp:
        return parse(await resp.text(), "specexp:")


def run(coro: Any) -> Any:
    async def with_session() -> Any:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as http:
            return await coro(http)

    return asyncio.run(with_session())


def assert_same_distribution(a: Counter[Any], b: Counter[Any], alpha: float = 1e-3) -> None:
    """Two-sample chi-square homogeneity test over the categories seen; categories too rare for the
    test (pooled count < 10) are merged into one. Fails when the samples differ at level ``alpha``."""
    pooled = a + b
    common = [c for c, n in pooled.items() if n >= 10]
    rows = [[a[c] for c in common], [b[c] for c in common]]
    rare = [sum(a.values()) - sum(rows[0]), sum(b.values()) - sum(rows[1])]
    if sum(rare) >= 10:
        rows = [[*r, n] for r, n in zip(rows, rare, strict=True)]
    assert len(rows[0]) >= 2, f"need at least two categories to compare, got {pooled}"
    p_value = chi2_contingency(rows).pvalue
    assert p_value > alpha, f"distributions differ: p={p_value:.2e}\n{a.most_common(8)}\n{b.most_common(8)}"
