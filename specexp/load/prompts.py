"""Prompt sources: random token ids, a small built-in set, or a JSONL file; unique per point.

Prefix caches make a repeated prompt far cheaper than a new one, so unless the workload says
otherwise every prompt a server sees within a sweep is new: random prompts are drawn from a stream
seeded by (sweep, job, repeat, phase); text prompts get a unique tag in front.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from specexp.config import WorkloadConfig

Prompt = str | list[int]

BUILTIN = [
    "Explain how speculative decoding speeds up inference for large language models.",
    "Write a short story about a lighthouse keeper who discovers a message in a bottle.",
    "List the steps to make a cup of tea, and explain why each step matters.",
    "Summarize the causes and consequences of the industrial revolution in Europe.",
    "Describe the water cycle to a ten-year-old, with an everyday example.",
    "Write a Python function that returns the n-th Fibonacci number, and explain it.",
    "What are the trade-offs between tensor parallelism and pipeline parallelism?",
    "Compose a poem about the first snow of winter in a quiet mountain village.",
    "Explain the difference between latency and throughput with an analogy.",
    "Give a recipe for a simple vegetable soup and tips to make it tastier.",
    "Describe how a hash table works and when it performs poorly.",
    "Write a letter to a friend recommending a book you enjoyed, and say why.",
    "Explain what a Prometheus counter is and how to compute a rate from it.",
    "Tell the history of the printing press and its effect on science.",
    "How does a CPU cache work, and why does memory layout matter for speed?",
    "Write a dialogue between a teacher and a student about prime numbers.",
]


def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "little")


def _texts(cfg: WorkloadConfig) -> list[str]:
    if cfg.kind == "builtin":
        return BUILTIN
    lines = Path(cfg.path).read_text().splitlines()
    texts = [_prompt_of(json.loads(line), cfg.path, i) for i, line in enumerate(lines, 1) if line.strip()]
    if not texts:
        raise ValueError(f"workload.path: {cfg.path} holds no prompts")
    return texts


def _prompt_of(row: dict, path: str | None, line: int) -> str:
    for key in ("prompt", "text"):
        if isinstance(row.get(key), str):
            return row[key]
    raise ValueError(f"workload.path: {path}:{line} has no 'prompt' string")


def make_prompts(cfg: WorkloadConfig, n: int, stream: str) -> list[Prompt]:
    """``n`` prompts for one phase of one point; ``stream`` names it (sweep/job/repeat/phase)."""
    if cfg.kind == "random":
        lo, hi = cfg.token_range
        rng = np.random.default_rng(_seed(cfg.seed, stream if cfg.unique else ""))
        return [rng.integers(lo, hi, size=cfg.input_len).tolist() for _ in range(n)]
    texts = _texts(cfg)
    start = _seed(cfg.seed, stream if cfg.unique else "") % len(texts)
    picked = [texts[(start + i) % len(texts)] for i in range(n)]
    if not cfg.unique:
        return picked
    tag = hashlib.sha256(stream.encode()).hexdigest()[:10]
    return [f"[{tag}-{i}] {text}" for i, text in enumerate(picked)]
