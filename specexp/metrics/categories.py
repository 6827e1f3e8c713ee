"""Per-category results: the registry's ``per_category`` metrics, one key per prompt category.

/metrics counters cannot be split by category, so acceptance per category comes from the engine's
per-request counts (``request_counts``: the reference engine and SGLang 0.5.19+ stream them); counts
(requests, output tokens, verify steps, draft and accepted tokens) add up over the categories to the
point's totals. Throughput per category is the category's tokens over its own requests' time in
flight, at the point's concurrency (see the registry's definition).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from specexp.metrics.acceptance import AcceptanceCounts, acceptance_metrics
from specexp.metrics.requests import window_s
from specexp.records import RequestRecord

# Keys carry the category after a dot; MLflow keys allow letters, digits, _ - . space : and /.
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. :/]")
PER_REQUEST_KEYS = ("spec_verify_steps", "spec_draft_tokens", "spec_accepted_tokens", "accept_length", "accept_rate")


def label(category: str) -> str:
    """A category as it appears in a key: characters MLflow refuses become ``_``."""
    return _UNSAFE.sub("_", category) or "_"


def category_metrics(
    records: Sequence[RequestRecord],
    request_counts: Callable[[list[RequestRecord]], AcceptanceCounts | None],
) -> dict[str, float]:
    """``<key>.<category>`` for every category of the measured ``records``; {} when none has one."""
    names = sorted({label(r.category) for r in records if r.category is not None})
    if not names:
        return {}
    ok = [r for r in records if r.ok and r.chunks and r.end is not None]
    window = window_s(records)
    concurrency = sum(r.end - r.send for r in ok) / window if window > 0 else 0.0
    out: dict[str, float] = {}
    for name in names:
        mine = [r for r in ok if r.category is not None and label(r.category) == name]
        tokens = sum(r.output_tokens for r in mine)
        out[f"requests_ok.{name}"] = len(mine)
        out[f"output_tokens.{name}"] = tokens
        in_flight = sum(r.end - r.send for r in mine)
        if in_flight > 0:
            out[f"output_throughput.{name}"] = tokens / in_flight * concurrency
        acceptance = acceptance_metrics(request_counts(mine)) if mine else {}
        out |= {f"{key}.{name}": acceptance[key] for key in PER_REQUEST_KEYS if key in acceptance}
    return out
