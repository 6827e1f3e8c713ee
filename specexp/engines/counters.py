"""vLLM-style speculative-decoding counters: scraped from Prometheus text, turned into raw window counts.

vLLM exposes cumulative counters (vllm/v1/spec_decode/metrics.py); the reference engine keeps the
same names and semantics under its own prefix, so both engines' acceptance is computed by the same
code: deltas around the measured window, never the lifetime totals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.parser import text_string_to_metric_families

from specexp.metrics.acceptance import AcceptanceCounts

if TYPE_CHECKING:
    import aiohttp

DRAFTS = "spec_decode_num_drafts"
DRAFT_TOKENS = "spec_decode_num_draft_tokens"
ACCEPTED = "spec_decode_num_accepted_tokens"
ACCEPTED_PER_POS = "spec_decode_num_accepted_tokens_per_pos"


def parse(text: str, prefix: str) -> dict[str, float]:
    """Sum every ``<prefix>...`` counter, and every histogram's ``_sum`` and ``_count``, over its labels
    except ``position``.

    Keys are the counter name without prefix and ``_total``, a histogram's name without prefix plus
    ``_sum``/``_count``; per-position counters become ``spec_decode_num_accepted_tokens_per_pos[i]``.
    Summing over ``engine`` labels makes a data-parallel server one number, as its clients see it.
    """
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith(prefix) or family.type not in ("counter", "gauge", "histogram"):
            continue
        base = family.name[len(prefix) :]
        for sample in family.samples:
            if sample.name.endswith("_created") or sample.name.endswith("_bucket"):
                continue
            key = base if family.type != "histogram" else sample.name[len(prefix) :]
            if "position" in sample.labels:
                key = f"{base}[{sample.labels['position']}]"
            out[key] = out.get(key, 0.0) + sample.value
    return out


async def scrape(http: aiohttp.ClientSession, url: str, prefix: str) -> dict[str, float]:
    async with http.get(url) as resp:
        resp.raise_for_status()
        return parse(await resp.text(), prefix)


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0.0) for k in after}


def acceptance_counts(before: dict[str, float] | None, after: dict[str, float] | None) -> AcceptanceCounts | None:
    """The window's raw counts from two scrapes; None when the server has no spec counters. Verify
    steps are ``num_drafts``: decode steps that carried drafts (specexp.metrics.acceptance)."""
    if before is None or after is None:
        return None
    d = delta(before, after)
    if DRAFTS not in d:
        return None
    positions = sorted(
        (int(key[len(ACCEPTED_PER_POS) + 1 : -1]), value)
        for key, value in d.items()
        if key.startswith(ACCEPTED_PER_POS + "[")
    )
    return AcceptanceCounts(
        source="counters",
        verify_steps=d[DRAFTS],
        draft_tokens=d.get(DRAFT_TOKENS, 0.0),
        accepted_tokens=d.get(ACCEPTED, 0.0),
        accepted_per_position=tuple(value for _, value in positions),
    )
