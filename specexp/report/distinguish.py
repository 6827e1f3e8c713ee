"""The settings that tell one of a drafter's series apart from its others (measured on two engines, two
workloads, ...), so that a sweep-level key and a verdict line name what differs and nothing else."""

from __future__ import annotations


def _differing(ident: tuple, others: list[tuple]) -> list[tuple[str, str]]:
    keys = {k for other in others for k, v in other if (k, v) not in ident} | {
        k for k, v in ident if any((k, v) not in other for other in others)
    }
    return [(k, v) for k, v in ident if k in keys]


def _named(settings: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Of a config group whose ``name`` is among ``settings``, the name alone: ``humaneval``, not also
    its API, lengths and multi-line prompt format."""
    groups = {k.removesuffix(".name") for k, _ in settings if k.endswith(".name")}
    return [(k, v) for k, v in settings if k.endswith(".name") or k.rpartition(".")[0] not in groups]


def distinguishing(ident: tuple, others: list[tuple]) -> list[tuple[str, str]]:
    """The settings that tell ``ident`` from the drafter's other series, groups by their names where
    the names alone still tell every series apart."""
    short = {other: _named(_differing(other, others)) for other in others}
    unique = len({tuple(v) for v in short.values()}) == len(others)
    return short[ident] if unique else _differing(ident, others)
