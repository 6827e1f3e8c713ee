"""The one typed result of a point, as the sweepers, the analysis, the MLflow fetch and the comparison
all see it: written by the point, read back from disk (``results.json``) or from MLflow."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

BASELINE = "none"  # the drafter of a point without speculation


@dataclass
class PointResult:
    status: str  # ok | failed | interrupted | dry_run
    engine: str = ""
    model: str = ""
    drafter: str = BASELINE
    batch: int = 0
    load: str = "closed"  # load.kind: closed (batch streams) or rate (an open loop)
    rate: float | None = None  # load.rate: an open loop's requests/s
    params: dict[str, Any] = field(default_factory=dict)  # the resolved config as dotted keys
    metrics: dict[str, float] = field(default_factory=dict)
    windows: list[dict[str, float]] = field(default_factory=list)  # each window's metrics, warm-up ones included
    tags: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    run_id: str | None = None
    job_dir: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def speculative(self) -> bool:
        return self.drafter != BASELINE

    @classmethod
    def from_params(cls, status: str, params: dict[str, Any], **rest: Any) -> PointResult:
        """A result whose typed fields come from its flattened config: the one place where MLflow's
        string params become numbers."""
        return cls(
            status=status,
            engine=str(params.get("engine.name", "")),
            model=str(params.get("model.name", "")),
            drafter=str(params.get("drafter.name", BASELINE)),
            batch=int(params.get("batch", 0)),
            load=str(params.get("load.kind", "closed")),
            rate=_number(params.get("load.rate")),
            params=params,
            **rest,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PointResult:
        return cls(**data)


def _number(value: Any) -> float | None:
    """A param as a number; None for an absent or null one (MLflow keeps None as the string "None")."""
    return None if value in (None, "", "None", "null") else float(value)
