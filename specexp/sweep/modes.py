"""specexp's default Hydra sweeper: a server-ordered grid (``mode: grid``), an Optuna study
(``mode: optuna``) or an adaptive break-even search (``mode: crossover``), all on the skeleton of
specexp.sweep.skeleton. Its schema is config.SweeperConf;
hydra_plugins.specexp_sweepers is the thin face Hydra discovers."""

from __future__ import annotations

from typing import Any

from specexp.config import ConfigError, CrossoverConf, TuneConf
from specexp.console import invalid_config_exits
from specexp.sweep.crossover import CrossoverSearch
from specexp.sweep.grid import run_grid
from specexp.sweep.skeleton import LaunchingSweeper
from specexp.sweep.tune import Tuner


class OrderedSweeper(LaunchingSweeper):
    def __init__(
        self,
        mode: str = "grid",
        max_batch_size: int | None = None,
        params: Any = None,
        crossover: Any = None,
        **tune: Any,
    ) -> None:
        if mode not in ("grid", "optuna", "crossover"):
            raise ConfigError("hydra.sweeper.mode", f"unknown mode {mode!r}", "use grid, optuna or crossover")
        self.mode = mode
        self.max_batch_size = max_batch_size
        self.params = {str(k): str(v) for k, v in (params or {}).items()}
        self.tune = TuneConf(**tune)
        self.crossover = dict(crossover or {})

    def sweep(self, arguments: list[str]) -> Any:
        if self.mode == "optuna":
            with invalid_config_exits():
                tuner = Tuner(self, self.tune, self.params)
            return tuner.sweep(arguments)
        if self.mode == "crossover":
            with invalid_config_exits():
                conf = CrossoverConf(**self.crossover)
            return [CrossoverSearch(self, conf, self.params).sweep(arguments).returns]
        return [run_grid(self, self.params, arguments).returns]
