"""Speculative decoding against live servers: exactness, acceptance and counters."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tokenizers import Tokenizer

from specexp.engines.counters import acceptance_counts, delta
from specexp.metrics.acceptance import acceptance_metrics
from specexp.models.tiny import TinyPaths
from tests.reference.client import PROMPTS, K, assert_same_distribution, complete, run, scrape, stream
from tests.reference.conftest import LiveServer, _server_fixture

GREEDY = {"temperature": 0, "ignore_eos": True}


def greedy_outputs(server: LiveServer, batch: int, max_tokens: int = 48) -> list[list[int]]:
    prompts = [PROMPTS[i % len(PROMPTS)] + " " * (i // len(PROMPTS)) for i in range(batch)]

    async def go(http: aiohttp.ClientSession) -> list[list[int]]:
        outs = await asyncio.gather(
            *(complete(http, server.url, prompt=p, max_tokens=max_tokens, **GREEDY) for p in prompts)
        )
        return [o["choices"][0]["token_ids"] for o in outs]

    return run(go)


@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("drafter", ["draft_server", "ngram_server"])
def test_greedy_speculation_is_token_identical(
    plain_server: LiveServer, drafter: str, batch: int, request: pytest.FixtureRequest
) -> None:
    spec = request.getfixturevalue(drafter)
    expected = greedy_outputs(plain_server, batch)
    assert greedy_outputs(spec, batch) == expected
    assert all(len(o) == 48 for o in expected)


def windowed(
    server: LiveServer, work: Callable[[aiohttp.ClientSession], Awaitable[Any]]
) -> tuple[Any, dict[str, float], dict[str, float]]:
    """Run ``work(http)`` between two /metrics scrapes: its result, the counter deltas, the acceptance keys."""

    async def go(http: aiohttp.ClientSession) -> tuple[Any, dict[str, float], dict[str, float]]:
        before = await scrape(http, server.url)
        result = await work(http)
        after = await scrape(http, server.url)
        return result, delta(before, after), acceptance_metrics(acceptance_counts(before, after))

    return run(go)


def chain_lengths(max_tokens: int) -> list[int]:
    """k_eff of each decode step of a request whose drafts are all accepted: the prefill emits 1 token,
    then each step k_eff + 1 with k_eff = min(k, remaining - 1)."""
    remaining, out = max_tokens - 1, []
    while remaining > 0:
        out.append(min(K, remaining - 1))
        remaining -= out[-1] + 1
    return out


def test_target_as_its_own_draft_accepts_everything(self_server: LiveServer) -> None:
    lengths = [1, 2, 3, 4, 5, 9, 17, 30, 64]

    async def work(http: aiohttp.ClientSession):
        return await asyncio.gather(
            *(
                complete(http, self_server.url, prompt=PROMPTS[i % 8], max_tokens=n, **GREEDY)
                for i, n in enumerate(lengths)
            )
        )

    outs, d, acc = windowed(self_server, work)
    tokens = sum(o["usage"]["completion_tokens"] for o in outs)
    assert tokens == sum(lengths)
    chains = [c for n in lengths for c in chain_lengths(n)]
    steps = len(lengths) + len(chains)
    assert acc["accept_rate"] >= 0.99
    assert d["spec_decode_num_draft_tokens"] == sum(chains)
    assert d["spec_decode_num_drafts"] == sum(c > 0 for c in chains)
    assert d["verify_steps"] == steps
    # one accepted token per draft, per step that drafted (prefill and undrafted steps excluded)
    assert acc["accept_length"] == pytest.approx(1 + sum(chains) / sum(c > 0 for c in chains))
    for i in range(K):  # every chain fully accepted: position i is accepted whenever it was proposed
        assert d[f"spec_decode_num_accepted_tokens_per_pos[{i}]"] == sum(c > i for c in chains)


def test_without_a_drafter_every_token_is_a_verify_step(plain_server: LiveServer) -> None:
    async def work(http: aiohttp.ClientSession):
        return await asyncio.gather(
            *(complete(http, plain_server.url, prompt=p, max_tokens=20, temperature=0.8) for p in PROMPTS)
        )

    outs, d, acc = windowed(plain_server, work)
    tokens = sum(o["usage"]["completion_tokens"] for o in outs)
    assert d["verify_steps"] == d["generation_tokens"] == tokens
    assert d["spec_decode_num_draft_tokens"] == d["spec_decode_num_accepted_tokens"] == 0
    assert acc == {"spec_verify_steps": 0.0}  # no verify step (the point records accept_length 1.0)


def test_tiny_drafter_acceptance_is_realistic(draft_server: LiveServer) -> None:
    """The damped tiny target: its 1-layer drafter agrees often, not always (report: ~0.6 at k=3)."""

    async def work(http: aiohttp.ClientSession):
        return await asyncio.gather(
            *(complete(http, draft_server.url, prompt=p, max_tokens=64, **GREEDY) for p in PROMPTS)
        )

    _, _, acc = windowed(draft_server, work)
    assert 0.5 <= acc["accept_rate"] <= 0.8, acc


def test_sampling_with_speculation_follows_the_target_distribution(
    plain_server: LiveServer, draft_server: LiveServer
) -> None:
    """Temperature > 0: positions 1..3 of 4 come from one speculative step (up to 2 drafts + 1) on the
    speculative server; their distributions must match plain sampling. Fixed seeds keep it stable."""
    n = 400
    body = {"prompt": "for i in range(10):", "max_tokens": 4, "temperature": 0.8, "top_p": 0.8, "ignore_eos": True}

    def samples(server: LiveServer, seed0: int) -> tuple[list[list[int]], dict[str, float]]:
        async def work(http: aiohttp.ClientSession) -> list[list[int]]:
            outs = await asyncio.gather(*(complete(http, server.url, seed=seed0 + i, **body) for i in range(n)))
            return [o["choices"][0]["token_ids"] for o in outs]

        result, d, _ = windowed(server, work)
        return result, d

    (spec, d), (plain, _) = samples(draft_server, 0), samples(plain_server, 100_000)
    assert d["spec_decode_num_draft_tokens"] >= n  # the speculative path was really taken
    for pos in (1, 2, 3):
        assert_same_distribution(Counter(s[pos] for s in spec), Counter(s[pos] for s in plain), alpha=1e-3 / 3)
    assert len({tuple(s) for s in spec}) > 10  # really sampling


def test_same_seed_same_tokens(draft_server: LiveServer) -> None:
    async def go(http: aiohttp.ClientSession) -> list[list[int]]:
        body = {"prompt": PROMPTS[0], "max_tokens": 24, "temperature": 1.0, "seed": 7, "ignore_eos": True}
        outs = [await complete(http, draft_server.url, **body) for _ in range(2)]
        return [o["choices"][0]["token_ids"] for o in outs]

    first, second = run(go)
    assert first == second


def test_32_concurrent_streams_and_exact_counters(draft_server: LiveServer, tiny: TinyPaths) -> None:
    """32 streams against 16 slots with 3 decode steps per admission round: all finish, one event per
    step (at most k+1 tokens), text equals the decoded ids, and the counters add up exactly."""
    n = 32

    def body(i: int) -> dict:
        return {
            "prompt": PROMPTS[i % 8] * (1 + i % 3),
            "max_tokens": 8 + i,
            "temperature": 0.0 if i % 2 else 1.0,
            "seed": i,
            "ignore_eos": i % 4 != 0,
        }

    async def work(http: aiohttp.ClientSession):
        return await asyncio.gather(*(stream(http, draft_server.url, **body(i)) for i in range(n)))

    results, d, acc = windowed(draft_server, work)
    tok = Tokenizer.from_file(str(tiny.target / "tokenizer.json"))
    eos = json.loads((tiny.target / "config.json").read_text())["eos_token_id"]
    total = 0
    for i, events in enumerate(results):
        *chunks, usage = events
        assert usage["choices"] == [] and usage["usage"]["prompt_tokens"] > 0
        ids = [t for c in chunks for t in c["choices"][0]["token_ids"]]
        assert all(1 <= len(c["choices"][0]["token_ids"]) <= K + 1 for c in chunks)
        assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
        finish = chunks[-1]["choices"][0]["finish_reason"]
        assert (finish, len(ids)) == ("length", 8 + i) or (finish == "stop" and ids[-1] == eos)
        assert usage["usage"]["completion_tokens"] == len(ids)
        assert "".join(c["choices"][0]["text"] for c in chunks) == tok.decode(ids, skip_special_tokens=True)
        total += len(ids)
    assert d["generation_tokens"] == total
    assert d["spec_decode_num_accepted_tokens"] + d["verify_steps"] == total
    assert (
        sum(d[f"spec_decode_num_accepted_tokens_per_pos[{i}]"] for i in range(K))
        == d["spec_decode_num_accepted_tokens"]
    )
    assert d["request_success"] == n
    assert d["spec_decode_num_drafts"] > 0 and 0 < acc["accept_rate"] < 1
    assert sum(len(e) - 1 for e in results) == d["verify_steps"]  # one event per step per sequence


# Depth K with one request running, 1 from two on; the target as its own draft accepts everything, so
# each step's tokens follow from its depth alone.
SCHEDULE = [[1, 1, K], [2, 16, 1]]
schedule_server = _server_fixture(
    "--num-continuous-decode-steps", "1", "--schedule", json.dumps(SCHEDULE), draft="tiny_self"
)


def per_depth(text: str) -> dict[str, dict[int, float]]:
    """The reference engine's ``*_per_depth`` counters: family name -> depth -> value."""
    out: dict[str, dict[int, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name.endswith("_per_depth"):
            for s in family.samples:
                if s.name.endswith("_total"):
                    out.setdefault(family.name.removeprefix("specexp:"), {})[int(s.labels["depth"])] = s.value
    return out


def depth_window(server: LiveServer, batch: int, max_tokens: int) -> tuple[dict[str, dict[int, float]], dict]:
    """Per-depth counter deltas and plain counter deltas over ``batch`` concurrent greedy requests."""

    async def go(http: aiohttp.ClientSession) -> tuple[dict[str, dict[int, float]], dict]:
        async def text() -> str:
            async with http.get(server.url + "/metrics") as resp:
                return await resp.text()

        before_text, before = await text(), await scrape(http, server.url)
        await asyncio.gather(
            *(complete(http, server.url, prompt=PROMPTS[i], max_tokens=max_tokens, **GREEDY) for i in range(batch))
        )
        after_text, after = await text(), await scrape(http, server.url)
        b, a = per_depth(before_text), per_depth(after_text)
        return {name: {d: a[name][d] - b[name][d] for d in a[name]} for name in a}, delta(before, after)

    return run(go)


def test_a_schedule_drafts_the_depth_of_the_running_batch(schedule_server: LiveServer) -> None:
    # One request: every decode step runs alone, at depth K, exactly as a fixed depth K would.
    alone, d = depth_window(schedule_server, 1, 24)
    chains = chain_lengths(24)
    assert alone["spec_decode_steps_per_depth"] == {1: 0, K: len(chains)}
    assert alone["spec_decode_num_draft_tokens_per_depth"] == {1: 0, K: sum(chains)}
    assert alone["spec_decode_num_accepted_tokens_per_depth"][K] == sum(chains) == d["spec_decode_num_accepted_tokens"]

    # Eight at once: steps with two or more running draft one token per row; only a step left with a
    # single row (admission or the tail) drafts K. The per-depth counts add up to the totals.
    crowd, d = depth_window(schedule_server, 8, 24)
    rows, drafted = crowd["verify_steps_per_depth"], crowd["spec_decode_num_draft_tokens_per_depth"]
    assert rows[1] > 8 * rows[K] and 0 < drafted[1] <= rows[1]
    assert crowd["spec_decode_num_accepted_tokens_per_depth"] == drafted  # the self draft is always right
    assert sum(drafted.values()) == d["spec_decode_num_draft_tokens"]
    assert sum(rows.values()) + 8 == d["verify_steps"]  # + one prefill step per request
