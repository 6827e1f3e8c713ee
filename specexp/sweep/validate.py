"""``+sweep=validate_schedule``'s axes, resolved from ``drafter.schedule`` while Hydra composes the sweep
(sweeps/validate_schedule.yaml): a missing or malformed schedule is one line and exit 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specexp.config import ConfigError
from specexp.console import invalid_config_exits
from specexp.schedule import ScheduleError, validation_arms, validation_batches


def _from_schedule(axis: Callable[[Any], str]) -> Callable[[Any], str]:
    def resolve(value: Any) -> str:
        with invalid_config_exits():
            if value is None:
                raise ConfigError(
                    "drafter.schedule",
                    "+sweep=validate_schedule validates a schedule, and none is set",
                    "add drafter.schedule=<sweep folder>/schedule.json (what +sweep=tune_schedule writes)",
                )
            try:
                return axis(value)
            except ScheduleError as exc:
                raise ConfigError("drafter.schedule", exc.problem, exc.fix) from None

    return resolve


RESOLVERS = {
    "specexp.schedule_batches": _from_schedule(validation_batches),
    "specexp.schedule_arms": _from_schedule(validation_arms),
}
