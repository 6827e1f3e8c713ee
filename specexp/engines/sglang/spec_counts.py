"""SGLang's acceptance as raw counts: per request from ``sglext.spec_tokens_details`` (0.5.19+), else
from ``/metrics`` counter deltas (0.5.13 - 0.5.18); see the package docstring for the versions.

SGLang's (and SpecForge's) own acceptance length is Σcompletion_tokens / Σspec_verify_ct, the first
token (from prefill) counted in the numerator; specexp's (specexp.metrics.acceptance) is 1 +
Σspec_num_correct_drafts / Σspec_verify_ct, prefill excluded. Where only emitted tokens are counted,
accepted = completion tokens − 1 per request − verify steps (every SGLang decode step verifies).
"""

from __future__ import annotations

from typing import Any

from specexp.engines import counters
from specexp.metrics.acceptance import AcceptanceCounts
from specexp.records import RequestRecord

# Per-request fields of sglext.spec_tokens_details kept in RequestRecord.extra.
# spec_accepted_per_pos: the reference engine's own addition (accepted at each draft position).
SPEC_FIELDS = (
    "spec_verify_ct",
    "spec_num_correct_drafts",
    "spec_num_proposed_drafts",
    "spec_accept_length",
    "spec_accepted_per_pos",
)
# /metrics counters (names without "sglang:" and "_total") behind the counter fallback.
GENERATION_TOKENS = "generation_tokens"
VERIFY_CALLS = "spec_verify_calls"
REQUESTS = "num_requests"


def observe(event: dict[str, Any], record: RequestRecord) -> None:
    """Keep a streamed event's spec_tokens_details (one object per request: n=1) in ``record.extra``."""
    details = (event.get("sglext") or {}).get("spec_tokens_details")
    if isinstance(details, dict):
        record.extra.update({key: details[key] for key in SPEC_FIELDS if key in details})


def per_request_counts(records: list[RequestRecord]) -> AcceptanceCounts | None:
    """Sums over the measured requests that report spec fields; None when none does."""
    measured = [r for r in records if r.ok and not r.warmup and r.extra.get("spec_verify_ct")]
    if not measured:
        return None
    steps = float(sum(r.extra["spec_verify_ct"] for r in measured))
    proposed = None
    if all("spec_num_correct_drafts" in r.extra for r in measured):
        accepted = float(sum(r.extra["spec_num_correct_drafts"] for r in measured))
    else:  # every request's tokens: its prefill token, then (accepted + 1) per verify step
        accepted = float(sum(r.output_tokens - 1 for r in measured)) - steps
    if all("spec_num_proposed_drafts" in r.extra for r in measured):
        proposed = float(sum(r.extra["spec_num_proposed_drafts"] for r in measured))
    positions: tuple[float, ...] = ()
    if all("spec_accepted_per_pos" in r.extra for r in measured):
        columns = zip(*(r.extra["spec_accepted_per_pos"] for r in measured), strict=True)
        positions = tuple(float(sum(column)) for column in columns)
    return AcceptanceCounts("per_request", steps, proposed, accepted, positions)


def counter_counts(
    before: dict[str, float] | None, after: dict[str, float] | None, requests: int
) -> AcceptanceCounts | None:
    """The same counts from /metrics deltas (``requests``: the window's finished requests, when the
    server has no request counter); None without counters or without a verify step."""
    if before is None or after is None:
        return None
    d = counters.delta(before, after)
    steps = d.get(VERIFY_CALLS, 0.0)
    if steps <= 0:
        return None
    finished = d.get(REQUESTS, float(requests))
    return AcceptanceCounts("counters", steps, accepted_tokens=d.get(GENERATION_TOKENS, 0.0) - finished - steps)
