"""What a measured window sends and when: the workload's items at a constant rate (or in a closed
loop), one item per arrival of a changing rate (``load.profile``), or a trace's requests with their
own lengths (``load.path``): random ids, or a dataset's prompts cut to them. Seeded by (load.seed,
repeat, window), so every arm of a sweep sends the same items at the same times, and its phases line
up across arms."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specexp.config import Config, LoadConfig, WorkloadConfig
from specexp.config.trace_file import TraceRequest
from specexp.load.arrivals import arrival_times
from specexp.load.conversation import Conversation
from specexp.load.lengths import Context, check_fits
from specexp.load.prompts import make_prompts, stream_seed
from specexp.load.rate_profile import phase_edges, profile_arrivals
from specexp.load.trace_prompts import check_dataset_trace, dataset_trace_items


def arrivals(load: LoadConfig, n: int, seed: Sequence[int]) -> list[float]:
    """Seconds from the window's start at which each of its requests arrives (``n``: a constant rate's
    count; a profile's and a trace's own count theirs)."""
    if load.path is not None:
        return [r.at for r in load.trace()]
    if load.profile is not None:
        return profile_arrivals(load.steps(), load.burstiness, seed)
    return arrival_times(n, float(load.rate or 0), load.burstiness, seed)


def window_items(cfg: Config, stream: str, seed: Sequence[int], tokenizer: str | None = None) -> list[Conversation]:
    """The measured items of one window, ``stream`` naming it, lengths counted by ``tokenizer``
    (specexp.load.prompts)."""
    load, w = cfg.load, cfg.workload
    if load.kind != "closed" and load.path is not None:
        return trace_items(w, load.trace(), stream, cfg.model.tokenizer or cfg.model.path)
    if load.kind != "closed" and load.profile is not None:
        return make_prompts(w, len(arrivals(load, 0, seed)), stream, tokenizer=tokenizer)
    return make_prompts(w, w.measured(cfg.streams), stream, tokenizer=tokenizer)


def check_trace(cfg: Config, context: Context | str) -> None:
    """A trace's prompts, before any server starts: a dataset's chosen and cut (a ConfigError where
    no tokenizer here can count them, or the dataset cannot be read), and each request within the
    context (prompts at most workload.input_len tokens; ``context`` a string: not known yet)."""
    load, w = cfg.load, cfg.workload
    if load.path is None:
        return
    if w.kind != "random":
        check_dataset_trace(w, cfg.model.tokenizer or cfg.model.path)
    if not isinstance(context, str):
        check_fits("workload.input_len", "a trace's prompts", (w.input_len, True), w.output_len, context)


def trace_items(
    w: WorkloadConfig, trace: Sequence[TraceRequest], stream: str, tokenizer: str | None = None
) -> list[Conversation]:
    """One prompt per trace request, of its input length (at most workload.input_len), asking its
    output length (at most workload.output_len): random ids, or a dataset's prompts chosen and cut to
    length by ``tokenizer`` (the served model's; specexp.load.trace_prompts). Each record keeps the
    trace's line and lengths and the prompt's own (extra ``trace_line``, ``input_asked``,
    ``input_sent``, ``output_asked``), so a length cut or not honoured shows."""
    if w.kind != "random":
        return dataset_trace_items(w, trace, stream, tokenizer)
    lo, hi = w.token_range
    rng = np.random.default_rng(stream_seed(w.seed, stream if w.unique else ""))
    items = []
    for r in trace:
        ids = rng.integers(lo, hi, size=max(1, min(r.input_len, w.input_len))).tolist()
        extra = (("trace_line", r.line), ("input_asked", r.input_len), ("input_sent", len(ids)))
        output = max(1, min(r.output_len, w.output_len))
        items.append(Conversation(turns=(ids,), max_tokens=output, extra=(*extra, ("output_asked", r.output_len))))
    return items


def phases(load: LoadConfig) -> list[float] | None:
    """The edges (seconds from a window's start) of the phases a changing load's results are cut into:
    a profile's steps, or a trace's slices of load.phase_s; None for a constant load."""
    if load.kind == "closed":
        return None
    if load.profile is not None:
        return phase_edges(load.steps())
    if load.path is not None:
        count = math.floor(load.trace()[-1].at / load.phase_s) + 1  # the last arrival inside the last phase
        return [k * load.phase_s for k in range(count + 1)]
    return None
