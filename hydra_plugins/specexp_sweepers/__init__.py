"""Hydra registers plugins by the module that defines them, and only under ``hydra_plugins``:
this name is what ``hydra/sweeper=specexp`` targets; the code lives in specexp.

Hydra imports this module on every start (plugin discovery), ``--help`` and a refused value included:
the sweep machinery (MLflow, Optuna, SciPy) is imported only when a multirun builds its sweeper.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hydra.plugins.sweeper import Sweeper

if TYPE_CHECKING:
    from hydra.types import HydraContext, TaskFunction
    from omegaconf import DictConfig


class SpecexpSweeper(Sweeper):
    """Server-ordered multirun or Optuna study, with sweep-level analysis (the default sweeper):
    specexp.sweep.modes.OrderedSweeper, built from the same settings when Hydra instantiates this."""

    def __init__(self, **settings: Any) -> None:
        from specexp.sweep.modes import OrderedSweeper

        self.ordered = OrderedSweeper(**settings)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.ordered.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        return self.ordered.sweep(arguments)

    def __getattr__(self, name: str) -> Any:
        """The rest of OrderedSweeper (plan, launcher_for, ...) as its own."""
        if name == "ordered":  # not built yet (an unpickled copy): no recursion
            raise AttributeError(name)
        return getattr(self.ordered, name)
