"""The items of one phase of one point: random token ids, or conversations from the workload's dataset.

Acceptance depends on what the model is asked, so every point of a sweep sends the same conversations
in the same order (a speculative point and its baseline answer the same questions); warm-up takes the
ones just before them. Prefix caches make a repeated prompt far cheaper than a new one, so unless the
workload says otherwise each point's first user turns get a tag of their own in front. Random prompts
are drawn from a stream seeded by (sweep, job, repeat, phase).
"""

from __future__ import annotations

import hashlib

import numpy as np

from specexp.config import WorkloadConfig
from specexp.load.conversation import Conversation
from specexp.load.datasets import conversations


def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "little")


def _formatted(c: Conversation, cfg: WorkloadConfig, tag: str | None) -> Conversation:
    turns = [cfg.prompt_format.format(prompt=t) for t in c.turns]
    if tag is not None:
        turns[0] = f"[{tag}] {turns[0]}"
    return Conversation(tuple(turns), c.system, c.category)


def check_workload(cfg: WorkloadConfig) -> None:
    """Read and validate the workload's dataset (once per process): a ConfigError before any server starts."""
    if cfg.kind != "random":
        conversations(cfg)


def make_prompts(cfg: WorkloadConfig, n: int, stream: str, warmup: bool = False) -> list[Conversation]:
    """``n`` items for one phase of one point; ``stream`` names it (sweep/job/repeat/phase)."""
    if cfg.kind == "random":
        lo, hi = cfg.token_range
        rng = np.random.default_rng(_seed(cfg.seed, stream if cfg.unique else ""))
        return [Conversation(turns=(rng.integers(lo, hi, size=cfg.input_len).tolist(),)) for _ in range(n)]
    found = conversations(cfg)
    start = _seed(cfg.seed) % len(found) - (n if warmup else 0)
    picked = [found[(start + i) % len(found)] for i in range(n)]
    tag = hashlib.sha256(stream.encode()).hexdigest()[:10] if cfg.unique else None
    return [_formatted(c, cfg, None if tag is None else f"{tag}-{i}") for i, c in enumerate(picked)]
