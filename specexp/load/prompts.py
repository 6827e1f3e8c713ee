"""The items of one phase of one point: random token ids, or conversations from the workload's dataset.

Acceptance depends on what the model is asked, so every point of a sweep sends the same conversations
in the same order (a speculative point and its baseline answer the same questions); warm-up takes the
ones just before them. Prefix caches make a repeated prompt far cheaper than a new one, so unless the
workload says otherwise each point's first user turns get a tag of their own in front. Random prompts
are drawn from a stream seeded by (sweep, job, repeat, phase).
"""

from __future__ import annotations

import hashlib
import logging

import numpy as np

from specexp.config import WorkloadConfig
from specexp.load.conversation import Conversation
from specexp.load.datasets import conversations, identity, located
from specexp.load.lengths import Context, TokenCounter, check_fits, tokenizer_file

log = logging.getLogger("specexp")


def stream_seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "little")


def _formatted(c: Conversation, cfg: WorkloadConfig, tag: str | None) -> Conversation:
    turns = [cfg.prompt_format.format(prompt=t) for t in c.turns]
    if tag is not None:
        turns[0] = f"[{tag}] {turns[0]}"
    return Conversation(tuple(turns), c.system, c.category)


def check_workload(cfg: WorkloadConfig, tokenizer: str | None = None) -> None:
    """Read and validate the workload's dataset (once per process): a ConfigError before any server
    starts. ``tokenizer`` counts a length bucket's tokens (datasets.conversations)."""
    if cfg.kind != "random":
        conversations(cfg, tokenizer)


def _picked(count: int, n: int, seed: int, warmup: bool) -> list[int]:
    """Which of ``count`` conversations a phase of ``n`` items sends: the same ones from the seed's
    start on, for every point; warm-up takes the ``n`` just before them."""
    start = stream_seed(seed) % count - (n if warmup else 0)
    return [(start + i) % count for i in range(n)]


_fitted: set[tuple] = set()  # (workload, tokenizer, context, reach) already found to fit, in this process
_said: set[str] = set()


def check_lengths(
    cfg: WorkloadConfig,
    context: Context | str,
    tokenizer: str | None,
    reach: tuple[int, int],
    lengths: str | None = None,
) -> None:
    """Every request the point sends fits ``context`` (prompt plus workload.output_len tokens), or a
    ConfigError names the first that does not: its file and line (workload.input_len for random
    prompts). ``reach``: the most items a phase sends, and the most a warm-up phase sends (a dataset's
    other rows are never sent, and ShareGPT holds a prompt of 284k tokens). ``context`` a string: the
    length is not known before the server runs (said once in the log). Text is counted with
    ``tokenizer`` (the served model's folder); none here: said once too. ``lengths`` counts a length
    bucket's tokens (datasets.conversations)."""
    if isinstance(context, str) or (cfg.kind != "random" and tokenizer_file(tokenizer) is None):
        why = context if isinstance(context, str) else f"{tokenizer} holds no tokenizer.json here to count with"
        if why not in _said:
            _said.add(why)
            log.info("prompt lengths are not checked before the server starts: %s", why)
        return
    if cfg.kind == "random":
        check_fits("workload.input_len", "random prompts", (cfg.input_len, True), cfg.output_len, context)
        return
    key = (identity(cfg), lengths, cfg.seed, cfg.output_len, cfg.ignore_eos, tokenizer, context, reach)
    if key in _fitted:
        return
    counter = TokenCounter(tokenizer_file(tokenizer))  # type: ignore[arg-type]  # checked above
    where_key = "workload.path" if cfg.path else "workload.dataset" if cfg.dataset else "workload.kind"
    found = located(cfg, lengths)
    sent = {*_picked(len(found), reach[1], cfg.seed, True), *_picked(len(found), reach[0], cfg.seed, False)}
    for where, conversation in (found[i] for i in sorted(sent)):
        check_fits(where_key, where, _longest_request(conversation, cfg, counter, context), cfg.output_len, context)
    _fitted.add(key)


def _longest_request(c: Conversation, cfg: WorkloadConfig, counter: TokenCounter, context: Context) -> tuple[int, bool]:
    """Prompt tokens of a conversation's last request, as (tokens, exact) (TokenCounter.tokens): its system
    message and every user turn as prompt_format writes it, and each earlier answer (output_len tokens
    with ignore_eos; none counted without, as the model may stop at once). A chat template's own tokens
    are not counted."""
    answers = (len(c.turns) - 1) * cfg.output_len if cfg.ignore_eos else 0
    texts = [c.system or "", *(cfg.prompt_format.format(prompt=t) for t in c.turns)]
    tokens, exact = counter.tokens(texts, context.length - cfg.output_len - answers)
    return answers + tokens, exact


def make_prompts(
    cfg: WorkloadConfig, n: int, stream: str, warmup: bool = False, tokenizer: str | None = None
) -> list[Conversation]:
    """``n`` items for one phase of one point; ``stream`` names it (sweep/job/repeat/phase);
    ``tokenizer`` counts a length bucket's tokens (datasets.conversations)."""
    if cfg.kind == "random":
        lo, hi = cfg.token_range
        rng = np.random.default_rng(stream_seed(cfg.seed, stream if cfg.unique else ""))
        return [Conversation(turns=(rng.integers(lo, hi, size=cfg.input_len).tolist(),)) for _ in range(n)]
    found = conversations(cfg, tokenizer)
    picked = [found[i] for i in _picked(len(found), n, cfg.seed, warmup)]
    tag = hashlib.sha256(stream.encode()).hexdigest()[:10] if cfg.unique else None
    return [_formatted(c, cfg, None if tag is None else f"{tag}-{i}") for i, c in enumerate(picked)]
