"""``baseline=auto``: a speedup needs a ``drafter=none`` point with the same settings, so a speculative
sweep that lacks one at some batch gets it added (and says so) rather than ending without speedups."""

from __future__ import annotations

from omegaconf import OmegaConf

from specexp.config import Config
from specexp.console import console
from specexp.point.plan import flat_params
from specexp.report.analysis import identity
from specexp.result import BASELINE, PointResult
from specexp.sweep.skeleton import LaunchingSweeper


def _drafter_key(override: str) -> bool:
    return override.lstrip("+~").split("=", 1)[0].split(".", 1)[0] == "drafter"


def _identity(cfg: Config) -> tuple:
    """The pairing key of a job's config, as the analysis will pair its result."""
    return identity(PointResult(status="planned", params=flat_params(OmegaConf.structured(cfg))))


def with_baselines(sweeper: LaunchingSweeper, jobs: list[list[str]]) -> list[list[str]]:
    """``jobs`` preceded by a ``drafter=none`` job for each speculative job (with ``baseline=auto``)
    that has no baseline among them: the same overrides with every ``drafter`` one replaced."""
    composed = [sweeper.compose(job) for job in jobs]
    have = {_identity(cfg) for cfg in composed if not cfg.drafter.speculative}
    added: list[list[str]] = []
    batches: list[int] = []
    for job, cfg in zip(jobs, composed, strict=True):
        if cfg.baseline != "auto" or not cfg.drafter.speculative:
            continue
        wanted = _identity(cfg)
        if wanted in have:
            continue
        baseline = [o for o in job if not _drafter_key(o)] + [f"drafter={BASELINE}"]
        have.add(wanted)
        added.append(baseline)
        batches.append(cfg.batch)
    if added:
        console.print(
            f"baseline=auto: no drafter={BASELINE} point at batch {', '.join(map(str, batches))}; "
            f"added {len(added)} so that speedups can be computed (baseline=off measures only what was asked)"
        )
    return added + jobs
