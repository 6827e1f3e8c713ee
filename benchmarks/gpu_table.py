"""The reference engine served on a GPU: issue 17's table, one short command (a few minutes on one GPU).

For each dtype, a reference server on the tiny model without and with the tiny drafter (k=4), driven
as a specexp point drives it: specexp's closed-loop streaming client, its default random workload
(64-token prompts, 64 tokens out, greedy, ignore_eos; ``batch`` warm-ups, then max(8, 4 x batch)
measured requests) and its metric definitions (docs/METRICS.md). Prints a markdown table: output
tok/s per batch, the drafter's speedup over none, TPOT p50 at the largest batch, TTFT p50 / p99 at
the smallest, and the acceptance rate. Per-step host and device time: benchmarks/reference_speculation.py.

    python benchmarks/gpu_table.py                       # cuda; float32, bfloat16, float16; batch 1 and 64
    python benchmarks/gpu_table.py --device cpu --dtypes float32 --batches 1,8    # the same shape on a CPU
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import aiohttp

from specexp.config import WorkloadConfig
from specexp.engines.counters import acceptance_counts, scrape
from specexp.load.client import run_closed_loop
from specexp.load.prompts import make_prompts
from specexp.metrics import requests
from specexp.metrics.acceptance import acceptance_metrics
from specexp.models.tiny import ensure_tiny
from specexp.servers import serve_reference

DRAFTERS = ("none", "tiny")


async def point(url: str, batch: int, stream: str) -> dict[str, float]:
    """One measured point at ``batch``: the client-side metrics and the acceptance from the server's counters."""
    workload = WorkloadConfig()
    body = {
        "model": "tiny",
        "max_tokens": workload.output_len,
        "temperature": workload.temperature,
        "ignore_eos": workload.ignore_eos,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    completions = url + "/v1/completions"

    def ignore(event: dict, record: object) -> None:
        pass

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        warm = make_prompts(workload, workload.warmups(batch), f"{stream}/warmup")
        await run_closed_loop(http, completions, warm, batch, body, ignore, warmup=True)
        before = await scrape(http, url + "/metrics", "specexp:")
        prompts = make_prompts(workload, workload.measured(batch), f"{stream}/measured")
        records = await run_closed_loop(http, completions, prompts, batch, body, ignore)
        after = await scrape(http, url + "/metrics", "specexp:")
    failed = [r.error for r in records if not r.ok]
    if failed:
        raise RuntimeError(f"{stream}: {len(failed)} requests failed, first: {failed[0]}")
    return requests.compute(records) | acceptance_metrics(acceptance_counts(before, after))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--k", type=int, default=4, help="draft tokens per step")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per server (specexp's engine=torch default)")
    ap.add_argument("--outputs", type=Path, default=Path("outputs"))
    args = ap.parse_args()
    batches = sorted(int(b) for b in args.batches.split(","))
    dtypes = args.dtypes.split(",")
    tiny = ensure_tiny(args.outputs)
    common = ["--model", str(tiny.target), "--served-model-name", "tiny", "--threads", str(args.threads)]
    common += ["--max-running-requests", str(max(batches)), "--num-continuous-decode-steps", "1"]
    common += ["--device", args.device]
    extra = {"none": [], "tiny": ["--draft-model", str(tiny.draft), "--num-speculative-tokens", str(args.k)]}
    table: dict[tuple[str, str], dict[int, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in dtypes:
            for name in DRAFTERS:
                log = Path(tmp) / f"{dtype}-{name}.log"
                with serve_reference([*common, "--dtype", dtype, *extra[name]], log) as url:
                    table[dtype, name] = {b: asyncio.run(point(url, b, f"{dtype}/{name}/{b}")) for b in batches}
                print(f"measured {dtype} {name}", flush=True)

    lo, hi = batches[0], batches[-1]
    tps = " | ".join(f"batch {b} tok/s" for b in batches)
    print(f"\nreference engine, {args.device}, model=tiny, drafter tiny k={args.k}, default random workload (64/64)\n")
    print(
        f"| dtype | drafter | {tps} | speedup {' / '.join(f'b{b}' for b in batches)} "
        f"| TPOT p50 b{hi} | TTFT p50 / p99 b{lo} | accept rate |"
    )
    print("|---|---|" + "---|" * len(batches) + "---|---|---|---|")
    for (dtype, name), row in table.items():
        base = table[dtype, "none"]
        speedup = (
            " / ".join(f"×{row[b]['output_throughput'] / base[b]['output_throughput']:.2f}" for b in batches)
            if name != "none"
            else "–"
        )
        rate = f"{row[lo]['accept_rate']:.2f}" if "accept_rate" in row[lo] else "–"
        print(
            f"| {dtype} | {name} | "
            + " | ".join(f"{row[b]['output_throughput']:.1f}" for b in batches)
            + f" | {speedup} | {row[hi]['tpot_ms_p50']:.1f} ms "
            f"| {row[lo]['ttft_ms_p50']:.1f} / {row[lo]['ttft_ms_p99']:.1f} ms | {rate} |"
        )


if __name__ == "__main__":
    main()
