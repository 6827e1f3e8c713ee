"""SGLang's acceptance as raw counts: per request from ``sglext.spec_tokens_details`` (0.5.19+), else
from ``/metrics`` counter deltas (0.5.13 - 0.5.18); see the package docstring for the versions.

SGLang's (and SpecForge's) acceptance length is Σcompletion_tokens / Σspec_verify_ct: the first
token, from prefill, is counted in the numerator, so the counts carry ``emitted_tokens``.
"""

from __future__ import annotations

from typing import Any

from specexp.engines import counters
from specexp.metrics.acceptance import AcceptanceCounts
from specexp.records import RequestRecord

# Per-request fields of sglext.spec_tokens_details kept in RequestRecord.extra.
SPEC_FIELDS = ("spec_verify_ct", "spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_accept_length")
# /metrics counters (names without "sglang:" and "_total") behind the counter fallback.
GENERATION_TOKENS = "generation_tokens"
VERIFY_CALLS = "spec_verify_calls"


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
    proposed = accepted = None
    if all("spec_num_proposed_drafts" in r.extra for r in measured):
        proposed = float(sum(r.extra["spec_num_proposed_drafts"] for r in measured))
        accepted = float(sum(r.extra.get("spec_num_correct_drafts", 0) for r in measured))
    return AcceptanceCounts(
        source="per_request",
        verify_steps=float(sum(r.extra["spec_verify_ct"] for r in measured)),
        draft_tokens=proposed,
        accepted_tokens=accepted,
        emitted_tokens=float(sum(r.output_tokens for r in measured)),
    )


def counter_counts(before: dict[str, float] | None, after: dict[str, float] | None) -> AcceptanceCounts | None:
    """The same ratio from /metrics deltas; None without counters or without a verify step."""
    if before is None or after is None:
        return None
    d = counters.delta(before, after)
    steps = d.get(VERIFY_CALLS, 0.0)
    if steps <= 0:
        return None
    return AcceptanceCounts(source="counters", verify_steps=steps, emitted_tokens=d.get(GENERATION_TOKENS, 0.0))
