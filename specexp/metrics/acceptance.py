"""Acceptance from raw counts: every engine adapter reports what it counted over the measured window
(``AcceptanceCounts``), and ``accept_length`` / ``accept_rate`` are computed here, once, for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AcceptanceCounts:
    """What an engine counted over the measured window, and where the counts came from."""

    source: str  # e.g. "counters" (/metrics deltas) or "per_request" (fields streamed with each request)
    verify_steps: float  # target verify steps
    draft_tokens: float | None = None  # draft tokens proposed; None: the engine does not count them
    accepted_tokens: float | None = None  # draft tokens accepted (bonus token excluded)
    # Tokens the verify steps produced, when the engine counts them itself (SGLang's Σcompletion_tokens,
    # prefill token included); None: 1 + accepted per step.
    emitted_tokens: float | None = None
    accepted_per_position: tuple[float, ...] = ()  # accepted at draft position i
    drafts: float | None = None  # steps that carried drafts: the per-position denominator (None: verify_steps)


def acceptance_metrics(counts: AcceptanceCounts | None) -> dict[str, float]:
    """The speculation keys of the registry from raw counts; {} when the engine reported none."""
    if counts is None:
        return {}
    steps = counts.verify_steps
    if steps <= 0:
        return {"spec_verify_steps": 0.0}
    out = {"spec_verify_steps": float(steps)}
    if counts.draft_tokens is not None and counts.accepted_tokens is not None:
        out["spec_draft_tokens"] = float(counts.draft_tokens)
        out["spec_accepted_tokens"] = float(counts.accepted_tokens)
    if counts.emitted_tokens is not None:
        out["accept_length"] = counts.emitted_tokens / steps
    elif counts.accepted_tokens is not None:
        out["accept_length"] = 1.0 + counts.accepted_tokens / steps
    if counts.draft_tokens and counts.accepted_tokens is not None:
        out["accept_rate"] = counts.accepted_tokens / counts.draft_tokens
        drafts = counts.drafts if counts.drafts is not None else steps
        if drafts > 0:
            for i, accepted in enumerate(counts.accepted_per_position):
                out[f"accept_rate_pos_{i}"] = accepted / drafts
    return out
