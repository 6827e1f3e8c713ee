"""The Hydra task: compose → validate → run one point → return its results.

Under a multirun, specexp's sweeper (hydra/sweeper=specexp, the default) has already validated and
ordered every job; here each job only measures its own point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from specexp import help, point, server
from specexp.config import ConfigError
from specexp.configstore import CONF_DIR, register, to_config
from specexp.console import console, invalid_config_exits, points_table
from specexp.load.prompts import check_workload
from specexp.report.summary import summary_rows
from specexp.result import PointResult

register()
help.register_resolvers()


def task(raw: DictConfig) -> dict[str, Any]:
    hc = HydraConfig.get()
    single = hc.mode == RunMode.RUN
    if single:
        with invalid_config_exits():
            cfg = to_config(raw)
            check_workload(cfg.workload)  # a bad dataset file stops here, before any server
            if cfg.repeats > 1:
                raise ConfigError("repeats", "repeats are server launches, interleaved across a sweep", "add -m")
    else:  # the sweeper validated every job before launching any
        cfg = to_config(raw)
    if cfg.dry_run:
        print(point.dry_run_text(cfg), flush=True)
        return PointResult.from_params("dry_run", point.flat_params(raw)).to_json()
    result = point.run(cfg, raw, Path(hc.runtime.output_dir), hc.job.num if not single else 0)
    if single:
        server.stop()
        console.print(points_table(summary_rows([result]), f"results in {result.job_dir}"))
        if result.status != "ok":
            console.print(f"[red]point failed[/red]: {result.error}")
            raise SystemExit(1)
    return result.to_json()


main = hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(task)
