"""``+sweep=validate_schedule``'s axes, resolved from ``drafter.schedule`` while Hydra composes the sweep
(sweeps/validate_schedule.yaml): a missing or malformed schedule is one line and exit 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specexp.config import ConfigError
from specexp.console import invalid_config_exits
from specexp.depth_schedule import ScheduleError, validation_arms, validation_batches, validation_depth


def _from_schedule(axis: Callable[..., Any], required: bool = True) -> Callable[..., Any]:
    """``axis`` over the schedule (its last argument), a ConfigError for a bad one."""

    def resolve(*args: Any) -> Any:
        with invalid_config_exits():
            if required and args[-1] is None:
                raise ConfigError(
                    "drafter.schedule",
                    "+sweep=validate_schedule validates a schedule, and none is set",
                    "add drafter.schedule=<sweep folder>/schedule.json (what +sweep=tune_schedule writes)",
                )
            try:
                return axis(*args)
            except ScheduleError as exc:
                raise ConfigError("drafter.schedule", exc.problem, exc.fix) from None

    return resolve


RESOLVERS = {
    "specexp.schedule_batches": _from_schedule(validation_batches),
    "specexp.schedule_arms": _from_schedule(validation_arms),
    # the baseline drops drafter.schedule: it has no schedule and drafts nothing
    "specexp.schedule_depth": _from_schedule(validation_depth, required=False),
}
