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

from specexp import point, server
from specexp.config import ConfigError
from specexp.configstore import CONF_DIR, load, register
from specexp.console import console, points_table
from specexp.report.sweep import summary_rows

register()


def task(raw: DictConfig) -> dict[str, Any]:
    hc = HydraConfig.get()
    single = hc.mode == RunMode.RUN
    try:
        cfg = load(raw)
    except ConfigError as exc:
        if not single:
            raise
        console.print(f"[red]invalid configuration[/red]: {exc}")
        raise SystemExit(2) from None
    if cfg.dry_run:
        print(point.dry_run_text(cfg), flush=True)
        return {"status": "dry_run", "params": point.flat_params(raw), "metrics": {}}
    result = point.run(cfg, raw, Path(hc.runtime.output_dir), hc.job.num if not single else 0)
    if single:
        server.stop()
        console.print(points_table(summary_rows([result.to_json()]), f"results in {result.job_dir}"))
        if result.status != "ok":
            console.print(f"[red]point failed[/red]: {result.error}")
            raise SystemExit(1)
    return result.to_json()


main = hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(task)
