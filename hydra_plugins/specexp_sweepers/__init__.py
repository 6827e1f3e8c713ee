"""Hydra registers plugins by the module that defines them, and only under ``hydra_plugins``:
these names are what ``hydra/sweeper`` targets; the code lives in specexp."""

from specexp import sweeper


class SpecexpSweeper(sweeper.OrderedSweeper):
    """Server-ordered multirun with sweep-level analysis (hydra/sweeper=specexp, the default)."""
