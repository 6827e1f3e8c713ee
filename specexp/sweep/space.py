"""The search space, declared like hydra-optuna-sweeper's ``params`` (``range``, ``choice``,
``interval``, ``tag(log, ...)``), plus conditions: a parameter is only suggested when its
condition over earlier parameters holds (e.g. top-k only matters with more than one step)."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from specexp.config import ConfigError

_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne}
_CLAUSE = re.compile(r"^\s*([\w.]+)\s*(>=|<=|==|!=|>|<)\s*(-?[\d.]+)\s*$")


@dataclass(frozen=True)
class Clause:
    key: str
    op: str
    value: float

    def holds(self, values: Mapping[str, Any]) -> bool:
        return self.key in values and _OPS[self.op](float(values[self.key]), self.value)


def parse_condition(key: str, text: str) -> list[Clause]:
    """``"drafter.num_steps > 1 and drafter.topk >= 2"`` → clauses that must all hold."""
    clauses = []
    for part in text.split(" and "):
        m = _CLAUSE.match(part)
        if not m:
            raise ConfigError(
                f"hydra.sweeper.conditions.{key}",
                f"cannot read {part!r}",
                "write '<key> <op> <number>' joined by ' and ', e.g. 'drafter.num_steps > 1'",
            )
        clauses.append(Clause(m[1], m[2], float(m[3])))
    return clauses


def distribution(key: str, text: str) -> BaseDistribution | str:
    """An Optuna distribution for a sweep expression; a plain value stays a fixed override."""
    override = OverridesParser.create().parse_override(f"{key}={text}")
    if not override.is_sweep_override():
        return override.get_value_element_as_str()
    value = override.value()
    log = "log" in getattr(value, "tags", set())
    if isinstance(value, ChoiceSweep):
        return CategoricalDistribution(list(value.list))
    if isinstance(value, RangeSweep):
        start, stop, step = value.start, value.stop, value.step
        if all(isinstance(x, int) for x in (start, stop, step)):
            return IntDistribution(start, stop - step, step=step)  # Hydra's range excludes stop
        return CategoricalDistribution([float(x) for x in override.sweep_iterator()])
    if isinstance(value, IntervalSweep):
        if "int" in value.tags or all(isinstance(x, int) for x in (value.start, value.end)):
            return IntDistribution(int(value.start), int(value.end), log=log)
        return FloatDistribution(value.start, value.end, log=log)
    raise ConfigError(
        f"hydra.sweeper.params.{key}",
        f"unsupported sweep {text!r}",
        "use range(a, b), choice(x, y, ...), interval(a, b) or tag(log, interval(a, b))",
    )


def _suggest(trial: optuna.Trial, key: str, dist: BaseDistribution) -> Any:
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(key, dist.low, dist.high, step=dist.step, log=dist.log)
    if isinstance(dist, FloatDistribution):
        return trial.suggest_float(key, dist.low, dist.high, step=dist.step, log=dist.log)
    return trial.suggest_categorical(key, dist.choices)


def _values(dist: BaseDistribution) -> list[Any] | None:
    """Every value of a discrete distribution; None for a continuous one."""
    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    if isinstance(dist, IntDistribution):
        return list(range(dist.low, dist.high + 1, dist.step))
    return None


def split_sweeps(arguments: list[str]) -> tuple[list[str], dict[str, str]]:
    """Command-line overrides: the fixed ones, and the sweeps (``key=range(1,9)``) for the space."""
    parser = OverridesParser.create()
    fixed, swept = [], {}
    for text in arguments:
        if parser.parse_override(text).is_sweep_override():
            key, value = text.split("=", 1)
            swept[key] = value
        else:
            fixed.append(text)
    return fixed, swept


@dataclass
class SearchSpace:
    distributions: dict[str, BaseDistribution]
    fixed: dict[str, str]
    conditions: dict[str, list[Clause]]

    @classmethod
    def parse(cls, params: Mapping[str, str], conditions: Mapping[str, str]) -> SearchSpace:
        dists: dict[str, BaseDistribution] = {}
        fixed: dict[str, str] = {}
        for key, text in params.items():
            d = distribution(key, str(text))
            (fixed if isinstance(d, str) else dists)[key] = d  # type: ignore[index]
        for key in conditions:
            if key not in dists:
                raise ConfigError(
                    f"hydra.sweeper.conditions.{key}", "not a searched parameter", f"condition one of {sorted(dists)}"
                )
        return cls(dists, fixed, {k: parse_condition(k, v) for k, v in conditions.items()})

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        """Suggest each parameter in declaration order, skipping those whose condition fails."""
        values: dict[str, Any] = {}
        for key, dist in self.distributions.items():
            if all(c.holds(values) for c in self.conditions.get(key, [])):
                values[key] = _suggest(trial, key, dist)
        return values

    def grid(self) -> dict[str, list[Any]]:
        """The space as GridSampler wants it (every distribution must be discrete)."""
        out = {}
        for key, d in self.distributions.items():
            values = _values(d)
            if values is None:
                raise ConfigError(
                    f"hydra.sweeper.params.{key}",
                    "a grid needs discrete values",
                    "use range() or choice(), or sampler=tpe",
                )
            out[key] = values
        return out

    def size(self) -> int | None:
        """How many configurations the space holds, conditions obeyed (a parameter whose condition
        fails is not suggested at all); None for a continuous one."""
        choices = [(key, _values(d)) for key, d in self.distributions.items()]
        if any(values is None for _, values in choices):
            return None

        def count(i: int, chosen: dict[str, Any]) -> int:
            if i == len(choices):
                return 1
            key, values = choices[i]
            if not all(c.holds(chosen) for c in self.conditions.get(key, [])):
                return count(i + 1, chosen)
            return sum(count(i + 1, {**chosen, key: v}) for v in values or [])

        return count(0, {})

    def without(self, keys: Collection[str]) -> SearchSpace:
        """The space less ``keys`` and every parameter whose condition names a parameter it drops."""
        dropped = set(keys)
        while more := {
            k for k, cs in self.conditions.items() if k not in dropped and any(c.key in dropped for c in cs)
        }:
            dropped |= more
        kept = {k: d for k, d in self.distributions.items() if k not in dropped}
        conditions = {k: c for k, c in self.conditions.items() if k not in dropped}
        return SearchSpace(kept, self.fixed, conditions)

    def refused(self, accepts: Callable[[dict[str, Any]], bool], samples: int = 48) -> list[str]:
        """The parameters that take at most one value in the configurations ``accepts`` (the
        engine's checks): across ``samples`` configurations drawn from the space (conditions obeyed;
        a fixed seed, so the answer does not change), searching them could only prune trials."""
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
        seen: dict[str, set[Any]] = {k: set() for k in self.distributions}
        for _ in range(samples):
            trial = study.ask()
            values = self.suggest(trial)
            study.tell(trial, 0.0)
            if accepts(values):
                for k, v in values.items():
                    seen[k].add(v)
        return [k for k, values in seen.items() if len(values) < 2]

    def overrides(self, values: Mapping[str, Any]) -> list[str]:
        return [f"{k}={v}" for k, v in self.fixed.items()] + [f"{k}={v}" for k, v in values.items()]
