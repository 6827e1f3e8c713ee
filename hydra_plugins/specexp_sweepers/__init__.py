"""Hydra registers plugins by the module that defines them, and only under ``hydra_plugins``:
this name is what ``hydra/sweeper=specexp`` targets; the code lives in specexp."""

from specexp.sweep import modes


class SpecexpSweeper(modes.OrderedSweeper):
    """Server-ordered multirun or Optuna study, with sweep-level analysis (the default sweeper)."""
