"""Synthetic acceptance as every engine that runs it records it (``drafter.synthetic_acceptance_*``).

Under it verification accepts by a calibrated coin, so a point's outputs are not the model's: its
drafter is recorded under a name that says so (each acceptance setting its own series in the
report, never averaged with the real drafter's points), its run is tagged, and the console says it.
"""

from __future__ import annotations

from specexp.config import DrafterConfig

TAG = "specexp.synthetic_acceptance"


def label(drafter: DrafterConfig) -> str:
    """``tiny_synthetic2.5`` (a length) or ``tiny_synthetic_rates_1-0.5-0-0``; the name alone otherwise.
    Characters MLflow takes in a metric name, since series keys carry it."""
    if drafter.synthetic_acceptance_length is not None:
        return f"{drafter.name}_synthetic{drafter.synthetic_acceptance_length:g}"
    if drafter.synthetic_acceptance_rates is not None:
        return f"{drafter.name}_synthetic_rates_" + "-".join(f"{r:g}" for r in drafter.synthetic_acceptance_rates)
    return drafter.name


def tags(drafter: DrafterConfig) -> dict[str, str]:
    """The run's tag: the per-position rates acceptance followed."""
    if not drafter.synthetic:
        return {}
    return {TAG: ",".join(f"{r:g}" for r in drafter.synthetic_rates)}


def notes(drafter: DrafterConfig) -> list[str]:
    """What the console says before the server starts."""
    if not drafter.synthetic:
        return []
    return [
        f"{drafter.synthetic_key}: acceptance is synthetic (per-position rates {drafter.synthetic_rates}); "
        "the drafter still drafts, but outputs are not the model's, so their equivalence is not checked"
    ]
