"""Per-step cost of the reference engine, in process: device x dtype x batch, without and with the tiny drafter.

Drives the engine's own step loop (no HTTP, no engine thread) on the tiny model, like a server at a
steady batch: ``batch`` greedy requests with random prompts are admitted and prefilled, then
``--warmup`` steps run untimed and ``--repeats`` windows of ``--steps`` steps are timed, the drafters'
engines taking turns window by window. No request finishes meanwhile, so every step has the full
batch and, as in a server, a new KV length. Printed per point:

- accept length: tokens per row per step over all timed steps (1 without a drafter);
- host ms/step: a step's wall time as the host sees it, in the median window (a shared machine's
  noise mostly slows windows down); every step ends reading the accepted tokens back, a device sync,
  so this is the step's cost on any device;
- tok/s: batch x accept length / host time per step, and the drafter's speedup over none;
- device ms/step (CUDA only): GPU kernel time per step, from the torch profiler over ``--profile-steps``
  further steps. CUDA events would time the span between two points of the stream, idle gaps
  included, so a host-bound step would read the same; kernel time shows it: device ms far below host
  ms means the host is the bottleneck (issue 17: cuDNN attention setup, 26 ms of CPU per call);
- top host op: the profiled op with the most host time per step (where host ms goes).

With ``--deep K``, a third row per batch, ``deep``: an engine built for K draft tokens whose depth
schedule drafts ``--k`` at every batch, as a deployed schedule's deep server runs its shallow range
(issue 23: is a shallow step in a deep server dearer than in a shallow one? its speedup is over none),
then its step time over the tiny row's, window by window.

Not a test: figures only. The served view (TTFT, TPOT over HTTP) is benchmarks/gpu_table.py.

    .venv/bin/python benchmarks/reference_speculation.py [--devices cpu,cuda] [--dtypes float32,bfloat16]
        [--batches 1,64] [--k 4] [--steps 20] [--repeats 3] [--threads N] [--deep K]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from specexp.depth_schedule import Schedule
from specexp.models.tiny import ensure_tiny
from specexp.reference.__main__ import DTYPES
from specexp.reference.drafters import ModelDrafter
from specexp.reference.model import Llama
from specexp.reference.prometheus import EngineMetrics
from specexp.reference.request import RequestState
from specexp.reference.scheduler import BatchEngine

DRAFTERS = ("none", "tiny")


@dataclass
class Point:
    tok_s: float
    accept_length: float
    host_ms: float
    device_ms: float | None
    top_op: str


def engine_at_batch(
    target: Llama,
    draft: Llama | None,
    k: int,
    batch: int,
    prompt_len: int,
    max_tokens: int,
    schedule: Schedule | None = None,
) -> tuple[BatchEngine, list[int]]:
    """An engine with ``batch`` greedy requests admitted and prefilled, and the list its rows emit into.

    The KV caches are sized for the whole run up front: their doubling (a copy of every layer's cache,
    once per power of two) would otherwise land in some timed windows and not others."""
    drafter = ModelDrafter(draft, batch) if draft else None
    engine = BatchEngine(target, drafter, k, batch, 1, EngineMetrics(k if draft else 0), schedule)
    for cache in (engine.cache, drafter.cache) if drafter else (engine.cache,):
        cache.reserve(prompt_len + max_tokens + k)
    emitted: list[int] = []
    gen = torch.Generator().manual_seed(batch)
    vocab = target.cfg.vocab_size
    for _ in range(batch):
        prompt = torch.randint(2, vocab, (prompt_len,), generator=gen).tolist()
        engine.submit(RequestState(prompt, max_tokens, 0.0, 1.0, True, lambda t, f: emitted.append(len(t))))
    engine._prefill(engine._admit())
    return engine, emitted


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Arm:
    """One engine at the batch, its rows' emitted counts and its timed windows' wall times."""

    name: str
    engine: BatchEngine
    emitted: list[int]
    walls: list[float] = field(default_factory=list)


def arm(
    name: str, target: Llama, draft: Llama | None, k: int, batch: int, args: argparse.Namespace, plan: Schedule | None
) -> Arm:
    steps = args.warmup + args.repeats * args.steps + args.profile_steps
    return Arm(name, *engine_at_batch(target, draft, k, batch, args.prompt_len, 1 + steps * (args.k + 1), plan))


def timed(arms: list[Arm], args: argparse.Namespace, device: torch.device) -> None:
    """Warm every arm up, then time their windows in turns, serpentine (A B | B A | ...): a drift of the
    machine's speed then lands on every arm alike, and the arms' window ratios are paired."""
    for a in arms:
        for _ in range(args.warmup):
            a.engine._step()
        sync(device)
        a.emitted.clear()
    for w in range(args.repeats):
        for a in arms if w % 2 == 0 else arms[::-1]:
            start = time.perf_counter()
            for _ in range(args.steps):
                a.engine._step()
            sync(device)
            a.walls.append(time.perf_counter() - start)


def point(a: Arm, batch: int, args: argparse.Namespace, device: torch.device) -> Point:
    step_s = sorted(a.walls)[len(a.walls) // 2] / args.steps
    accept_length = sum(a.emitted) / (batch * args.repeats * args.steps)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(args.profile_steps):
            a.engine._step()
        sync(device)
    ops = prof.key_averages()
    device_ms = None
    if device.type == "cuda":
        kernels = [e for e in ops if e.device_type == DeviceType.CUDA and not e.is_user_annotation]
        device_ms = sum(e.self_device_time_total for e in kernels) / 1e3 / args.profile_steps
    host_ops = [e for e in ops if e.device_type == DeviceType.CPU]
    top = max(host_ops, key=lambda e: e.self_cpu_time_total)
    top_op = f"{top.key} {top.self_cpu_time_total / 1e3 / args.profile_steps:.1f} ms"
    return Point(batch * accept_length / step_s, accept_length, step_s * 1e3, device_ms, top_op)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--k", type=int, default=4, help="draft tokens per step")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per window")
    ap.add_argument("--repeats", type=int, default=3, help="timed windows; the median is reported")
    ap.add_argument("--profile-steps", type=int, default=3)
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    ap.add_argument("--deep", type=int, help="also an engine built for this many draft tokens, scheduled to draft --k")
    ap.add_argument("--outputs", type=Path, default=Path("outputs"))
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    tiny = ensure_tiny(args.outputs)
    batches = [int(b) for b in args.batches.split(",")]
    max_len = args.prompt_len + (args.warmup + args.repeats * args.steps + args.profile_steps + 1) * (args.k + 1) + 1
    print(
        f"model=tiny, k={args.k}, prompts of {args.prompt_len}, {args.warmup} warm-up steps, median of {args.repeats} "
        f"windows of {args.steps} steps, "
        f"greedy, torch {torch.__version__}, {torch.get_num_threads()} thread(s)"
    )
    head = f"{'device':>6} {'dtype':>8} {'batch':>5} {'drafter':>7} {'tok/s':>9} {'speedup':>7} {'acc len':>7}"
    print(f"{head} {'host ms':>8} {'device ms':>9}  top host op (per step)")
    with torch.inference_mode():
        for device_name in args.devices.split(","):
            device = torch.device(device_name)
            for dtype_name in args.dtypes.split(","):
                dtype = DTYPES[dtype_name]
                target = Llama(tiny.target, dtype, device, max_len)
                draft = Llama(tiny.draft, dtype, device, max_len)
                for batch in batches:
                    arms = [
                        arm(name, target, draft if name == "tiny" else None, args.k, batch, args, None)
                        for name in DRAFTERS
                    ]
                    if args.deep:
                        arms.append(arm("deep", target, draft, args.deep, batch, args, Schedule(((1, batch, args.k),))))
                    timed(arms, args, device)
                    base = None
                    for a in arms:
                        p = point(a, batch, args, device)
                        base = base or p.tok_s
                        speedup = f"x{p.tok_s / base:.2f}" if a.name != "none" else "-"
                        dev = f"{p.device_ms:.2f}" if p.device_ms is not None else "-"
                        print(
                            f"{device_name:>6} {dtype_name:>8} {batch:>5} {a.name:>7} {p.tok_s:>9.1f} {speedup:>7} "
                            f"{p.accept_length:>7.2f} {p.host_ms:>8.2f} {dev:>9}  {p.top_op}",
                            flush=True,
                        )
                    if args.deep:
                        tiny_arm, deep_arm = arms[1], arms[2]
                        r = [d / t for d, t in zip(deep_arm.walls, tiny_arm.walls, strict=True)]
                        print(
                            f"{'':>22}deep/tiny step time, window by window: median {median(r):.3f} "
                            f"(range {min(r):.3f}-{max(r):.3f}, {len(r)} windows)",
                            flush=True,
                        )


if __name__ == "__main__":
    main()
