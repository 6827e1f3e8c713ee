"""Does speculation pay on the reference engine? model=tiny, with and without the tiny drafter.

Starts its own servers, runs closed-loop streamed load at each concurrency (warm-up excluded) and
prints output tok/s, mean single-stream decode tok/s ((tokens - 1) / (e2e - ttft), as METRICS.md
defines it), the acceptance from the server's counters, and the speedups. Not a test: figures only.

    .venv/bin/python benchmarks/reference_speculation.py [--batches 1,4,16] [--k 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from specexp.engines.counters import acceptance_counts, parse
from specexp.metrics.acceptance import acceptance_metrics
from specexp.models.tiny import ensure_tiny
from specexp.server import serve_reference as serve

PROMPT_WORDS = [
    "def",
    "class",
    "return",
    "import",
    "self",
    "value",
    "range",
    "list",
    "dict",
    "yield",
    "lambda",
    "while",
    "for",
    "if",
    "else",
]


def prompt(i: int) -> str:
    """Distinct prompts (no two requests share one), about 30 tokens each."""
    return " ".join(PROMPT_WORDS[(i * 7 + j * 3) % len(PROMPT_WORDS)] for j in range(20)) + f" # {i}"


async def one(http: aiohttp.ClientSession, url: str, i: int, max_tokens: int) -> tuple[int, float]:
    """Stream one greedy request; returns (output tokens, decode tok/s)."""
    body = {"model": "tiny", "prompt": prompt(i), "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    first, tokens = None, 0
    async with http.post(url + "/v1/completions", json={**body, "stream": True}) as resp:
        resp.raise_for_status()
        async for line in resp.content:
            if not line.startswith(b"data: {"):
                continue
            tokens += len(json.loads(line[6:])["choices"][0]["token_ids"])
            first = first or time.perf_counter()
    end = time.perf_counter()
    return tokens, (tokens - 1) / (end - first) if first and end > first else 0.0


async def point(url: str, batch: int, requests: int, max_tokens: int) -> dict[str, float]:
    """Closed loop: ``batch`` requests in flight until ``requests`` are done, after ``batch`` warm-ups."""
    async with aiohttp.ClientSession() as http:
        await asyncio.gather(*(one(http, url, 10_000 + i, max_tokens) for i in range(batch)))
        async with http.get(url + "/metrics") as resp:
            before = parse(await resp.text(), "specexp:")
        queue = list(range(requests))
        results: list[tuple[int, float]] = []

        async def worker() -> None:
            while queue:
                results.append(await one(http, url, queue.pop(), max_tokens))

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(batch)))
        window = time.perf_counter() - start
        async with http.get(url + "/metrics") as resp:
            after = parse(await resp.text(), "specexp:")
    return {
        "output_tps": sum(t for t, _ in results) / window,
        "decode_tps": statistics.mean(d for _, d in results),
        **acceptance_metrics(acceptance_counts(before, after)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--k", type=int, default=3, help="draft tokens per step")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per server")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--outputs", type=Path, default=Path("outputs"))
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    tiny = ensure_tiny(args.outputs)
    common = ["--model", str(tiny.target), "--served-model-name", "tiny", "--threads", str(args.threads)]
    common += ["--max-running-requests", str(max(batches)), "--num-continuous-decode-steps", "1"]
    configs = {"none": [], "tiny": ["--draft-model", str(tiny.draft), "--num-speculative-tokens", str(args.k)]}
    table: dict[str, dict[int, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in configs.items():
            with serve([*common, *extra], Path(tmp) / f"{name}.log") as url:
                table[name] = {b: asyncio.run(point(url, b, max(8, 4 * b), args.max_tokens)) for b in batches}

    print(f"model=tiny, k={args.k}, max_tokens={args.max_tokens}, greedy, {args.threads} torch thread(s)/server")
    print(f"{'batch':>5} {'drafter':>7} {'out tok/s':>10} {'decode tok/s':>13} {'accept_rate':>11} {'accept_len':>10}")
    for b in batches:
        for name in configs:
            r = table[name][b]
            rate = f"{r['accept_rate']:.3f}" if "accept_rate" in r else "-"
            print(
                f"{b:>5} {name:>7} {r['output_tps']:>10.1f} {r['decode_tps']:>13.1f} {rate:>11} "
                f"{r.get('accept_length', 1.0):>10.2f}"
            )
    print("\nspeedup of the tiny drafter over none (output tok/s, decode tok/s):")
    losing = []
    for b in batches:
        out = table["tiny"][b]["output_tps"] / table["none"][b]["output_tps"]
        dec = table["tiny"][b]["decode_tps"] / table["none"][b]["decode_tps"]
        print(f"  batch {b:>3}: x{out:.2f} output, x{dec:.2f} decode")
        if out < 1:
            losing.append(b)
    if losing:
        print(f"speculation stops paying (output tok/s) at batch {min(losing)} on this CPU")
    else:
        print("speculation pays at every measured batch on this CPU")


if __name__ == "__main__":
    main()
