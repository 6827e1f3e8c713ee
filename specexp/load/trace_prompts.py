"""Dataset prompts of a trace's input lengths: each trace request gets a prompt of the workload's
dataset chosen and cut to the tokens it asks, so a replay has a real trace's lengths and real text.

The rule, per request in the trace's order, for ``wanted`` = its input length (at most
workload.input_len): the shortest prompt at least ``wanted`` tokens long that no earlier request got
(once all such are given, the shortest one again), cut to ``wanted`` tokens; where no prompt is that
long, the longest, whole. A prompt is a conversation's first user turn as workload.prompt_format
writes it, counted by the served model's tokenizer (without a chat template's tokens). The dataset
is ordered from the seed's start before the stable sort by length, so ties are seeded; the choice
depends on nothing else, so every arm sends the same prompts. Each record keeps ``input_sent`` (the
prompt's tokens, tag included) next to the trace's ``input_asked``: fewer sent than asked is a length
not honoured.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from specexp.config import ConfigError, WorkloadConfig
from specexp.config.trace_file import TraceRequest
from specexp.load.conversation import Conversation
from specexp.load.datasets import conversations, identity
from specexp.load.lengths import TokenCounter, tokenizer_file
from specexp.load.prompts import stream_seed


def trace_tokenizer(w: WorkloadConfig, model_tokenizer: str | None) -> Path:
    """The tokenizer.json that counts and cuts a trace's dataset prompts: workload.length_tokenizer,
    else the served model's; a ConfigError naming the key where there is none here."""
    folder = w.length_tokenizer or model_tokenizer
    path = tokenizer_file(folder)
    if path is None:
        raise ConfigError(
            "workload.length_tokenizer",
            f"{folder} holds no tokenizer.json to cut a trace's dataset prompts to its lengths with",
            "point it (or model.tokenizer) at a local tokenizer folder, or use workload=random",
        )
    return path


@lru_cache(maxsize=4)
def _counter(path: Path) -> TokenCounter:
    return TokenCounter(path)


Sorted = tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]
_sorted: dict[tuple, Sorted] = {}  # per dataset version, seed and tokenizer, in this process


def _by_length(w: WorkloadConfig, path: Path, tokenizer: str | None) -> Sorted:
    """The dataset's conversations (indices: from the seed's start, then stable by length) and each
    one's first prompt's token ids, in that order; tokenized once per process."""
    key = (identity(w), w.seed, tokenizer, path, path.stat().st_mtime_ns)
    if key in _sorted:
        return _sorted[key]
    found = conversations(w, tokenizer)
    start = stream_seed(w.seed) % len(found)
    order = [(start + i) % len(found) for i in range(len(found))]
    texts = [w.prompt_format.format(prompt=found[i].turns[0]) for i in order]
    encoded = _counter(path).tokenizer.encode_batch(texts, add_special_tokens=False)
    ids = sorted(zip(order, (tuple(e.ids) for e in encoded), strict=True), key=lambda p: len(p[1]))
    _sorted[key] = tuple(i for i, _ in ids), tuple(t for _, t in ids)
    return _sorted[key]


def check_dataset_trace(w: WorkloadConfig, model_tokenizer: str | None) -> None:
    """Before any server starts: a tokenizer here counts the dataset's prompts, and the dataset reads
    (ConfigError otherwise); its prompts sorted by length stay cached for the windows' choices."""
    _by_length(w, trace_tokenizer(w, model_tokenizer), model_tokenizer)


def choose(lengths: Sequence[int], wanted: Sequence[int]) -> list[int]:
    """Which of the prompts of ``lengths`` (ascending) each request of ``wanted`` tokens gets: the
    shortest at least that long not given yet, else the shortest at least that long, else the last."""
    free = list(range(len(lengths)))
    out = []
    for n in wanted:
        at = bisect.bisect_left(free, n, key=lambda k: lengths[k])
        if at < len(free):
            out.append(free.pop(at))
        else:
            out.append(min(bisect.bisect_left(lengths, n), len(lengths) - 1))
    return out


def _cut(counter: TokenCounter, head: str, ids: Sequence[int], wanted: int) -> tuple[str, int]:
    """``head`` and the first of ``ids`` as text, ``wanted`` tokens in all where the prompt is that long,
    and its tokens: text joined at the cut may merge across it when encoded again, so the cut moves
    until the count agrees (a few tries). A request asking fewer tokens than the head gets it and one."""
    room = min(len(ids), max(1, wanted - counter.count(head)))
    for _ in range(4):
        text = head + counter.tokenizer.decode(list(ids[:room]))
        sent = counter.count(text)
        moved = min(len(ids), max(1, room + wanted - sent))
        if sent == wanted or moved == room:
            break
        room = moved
    return text, sent


def dataset_trace_items(
    w: WorkloadConfig, trace: Sequence[TraceRequest], stream: str, model_tokenizer: str | None
) -> list[Conversation]:
    """One dataset prompt per trace request, of its input length (the rule above), asking its output
    length (at most workload.output_len); with workload.unique each gets the point's tag in front,
    counted in its length. Records keep ``trace_line``, ``input_asked``, ``input_sent``, ``output_asked``."""
    path = trace_tokenizer(w, model_tokenizer)
    counter = _counter(path)
    order, ids = _by_length(w, path, model_tokenizer)
    found = conversations(w, model_tokenizer)
    wanted = [max(1, min(r.input_len, w.input_len)) for r in trace]
    tag = hashlib.sha256(stream.encode()).hexdigest()[:10] if w.unique else None
    items = []
    for i, (r, k) in enumerate(zip(trace, choose([len(t) for t in ids], wanted), strict=True)):
        text, sent = _cut(counter, "" if tag is None else f"[{tag}-{i}] ", ids[k], wanted[i])
        c = found[order[k]]
        items.append(
            Conversation(
                turns=(text,),
                system=c.system,
                category=c.category,
                max_tokens=max(1, min(r.output_len, w.output_len)),
                extra=(
                    ("trace_line", r.line),
                    ("input_asked", r.input_len),
                    ("input_sent", sent),
                    ("output_asked", r.output_len),
                ),
            )
        )
    return items
