"""Acceptance from raw counts: every engine adapter reports what it counted over the measured window
(``AcceptanceCounts``), and ``accept_length`` / ``accept_rate`` are computed here, once, for all of them.

One definition for every engine: a *verify step* is one sequence's decode step that verified at least
one draft token (vLLM's ``spec_decode_num_drafts``, SGLang's ``spec_verify_ct``, the reference
engine's ``spec_decode_num_drafts``); prefill, and decode steps that drafted nothing, are not verify
steps. ``accept_length`` = accepted draft tokens per verify step + 1 (the bonus token), and
``accept_rate_pos_i`` = accepted at draft position i / verify steps. Engines that count only the
tokens they emitted (SGLang's counters before 0.5.19) give accepted = emitted − one prefill token per
request − verify steps, which is exact when every decode step drafts (EAGLE does).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AcceptanceCounts:
    """What an engine counted over the measured window, and where the counts came from."""

    source: str  # e.g. "counters" (/metrics deltas) or "per_request" (fields streamed with each request)
    verify_steps: float  # sequence decode steps that verified drafts (prefill excluded)
    draft_tokens: float | None = None  # draft tokens proposed; None: the engine does not count them
    accepted_tokens: float | None = None  # draft tokens accepted (bonus token excluded)
    accepted_per_position: tuple[float, ...] = ()  # accepted at draft position i


def acceptance_metrics(counts: AcceptanceCounts | None) -> dict[str, float]:
    """The speculation keys of the registry from raw counts; {} when the engine reported none."""
    if counts is None:
        return {}
    steps = counts.verify_steps
    if steps <= 0:
        return {"spec_verify_steps": 0.0}
    out = {"spec_verify_steps": float(steps)}
    if counts.accepted_tokens is None:
        return out
    out["spec_accepted_tokens"] = float(counts.accepted_tokens)
    out["accept_length"] = 1.0 + counts.accepted_tokens / steps
    for i, accepted in enumerate(counts.accepted_per_position):
        out[f"accept_rate_pos_{i}"] = accepted / steps
    if counts.draft_tokens:
        out["spec_draft_tokens"] = float(counts.draft_tokens)
        out["accept_rate"] = counts.accepted_tokens / counts.draft_tokens
    return out
