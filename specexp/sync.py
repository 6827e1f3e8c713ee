"""``python -m specexp.sync FOLDER``: send a run or sweep folder's results to MLflow.

For results measured while tracking was unreachable (specexp then exits with code 3 and names this
command) or disabled (``tracking.enabled=false``): the store is the one the folder's config names.
Idempotent: a point uploaded completely before is left alone and the sweep's summary only logs what
changed, so a second sync adds nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from omegaconf import OmegaConf

from specexp import tracking
from specexp.config import ConfigError, TrackingConfig
from specexp.point.record import RESULTS
from specexp.point.upload import upload_saved
from specexp.result import PointResult
from specexp.sweep import folder
from specexp.sweep.recorder import SweepRecorder


def sync_run(run_dir: Path) -> None:
    config = OmegaConf.load(run_dir / "config.yaml")
    cfg = TrackingConfig(**{**OmegaConf.to_container(config.tracking), "enabled": True})
    outputs = Path(config.outputs)
    tracking.check(cfg, outputs)
    saved = PointResult.from_json(json.loads((run_dir / RESULTS).read_text()))
    result = upload_saved(cfg, outputs, saved, run_dir)
    print(f"{run_dir}: run {result.run_id} in {cfg.uri}")


def sync_sweep(sweep_dir: Path) -> bool:
    """Every point of the sweep, then its summary on the parent run; False if something failed."""
    record = folder.read_record(sweep_dir) or {}
    tracking.check(TrackingConfig(**{**record["tracking"], "enabled": True}), Path(record["outputs"]))
    recorder = SweepRecorder.of(sweep_dir)
    results = recorder.completed()
    extra = [sweep_dir / n for n in ("trials.csv", "best.csv")]  # an Optuna sweep's
    recorder.finish(
        folder.current(results), record.get("state") not in ("finished", "failed"), extra_files=extra, show=False
    )
    print(f"{sweep_dir}: {len(results)} point(s), parent run {recorder.parent_id} in {recorder.tracking.uri}")
    return not recorder.untracked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specexp.sync", description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a run folder (outputs/runs/ID) or a sweep folder (multirun/ID)")
    args = parser.parse_args(argv)
    target: Path = args.folder.resolve()
    try:
        if (target / folder.RECORD).is_file():
            return 0 if sync_sweep(target) else tracking.TRACKING_FAILED
        if (target / RESULTS).is_file():
            sync_run(target)
            return 0
    except ConfigError as exc:
        print(f"invalid configuration: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the store failed half way: nothing is lost, a later sync goes on
        print(f"tracking failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return tracking.TRACKING_FAILED
    print(f"{target}: neither a run folder (results.json) nor a sweep folder ({folder.RECORD})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
