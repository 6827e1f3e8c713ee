"""A depth schedule: the speculation depth to draft at each number of running requests.

Written as inclusive ranges ``[[batch_from, batch_to, num_steps], ...]`` that cover 1..max with no
gap and no overlap (vLLM's ``num_speculative_tokens_per_batch_size`` shape), or as the path of a
``schedule.json`` holding them (what ``+sweep=tune_schedule`` writes). Depth 0 means no drafting at
that batch. The lowest layer: the config schema, every engine adapter and the reference engine use it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Range = tuple[int, int, int]


class ScheduleError(ValueError):
    """A malformed schedule: what is wrong and how to fix it (the schema names the key)."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}. Fix: {fix}")
        self.problem, self.fix = problem, fix


EXAMPLE = "[[1,4,5],[5,16,2]]"


@dataclass(frozen=True)
class Schedule:
    ranges: tuple[Range, ...]

    @classmethod
    def parse(cls, value: Any) -> Schedule:
        """A schedule from ranges, or from the path of a schedule.json; ScheduleError when malformed."""
        if isinstance(value, str | Path):
            return cls.load(Path(value))
        if not isinstance(value, list | tuple) or not value:
            raise ScheduleError(
                f"{value!r} is neither a list of [batch_from, batch_to, num_steps] nor a path",
                f"write e.g. {EXAMPLE}, or the path of a schedule.json",
            )
        ranges = []
        for entry in value:
            if (
                not isinstance(entry, list | tuple)
                or len(entry) != 3
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in entry)
            ):
                raise ScheduleError(
                    f"entry {entry!r} is not [batch_from, batch_to, num_steps]", f"write e.g. {EXAMPLE}"
                )
            ranges.append((entry[0], entry[1], entry[2]))
        expected = 1
        for lo, hi, depth in ranges:
            if lo != expected:
                what = "a gap" if lo > expected else "an overlap"
                raise ScheduleError(
                    f"range [{lo}, {hi}, {depth}] starts at batch {lo}: {what} after batch {expected - 1}"
                    if expected > 1
                    else f"the first range starts at batch {lo}, not 1",
                    f"start it at batch {expected} (ranges are inclusive, in order, covering 1..max)",
                )
            if hi < lo:
                raise ScheduleError(f"range [{lo}, {hi}, {depth}] ends before it starts", "use batch_from <= batch_to")
            if depth < 0:
                raise ScheduleError(f"range [{lo}, {hi}, {depth}] has a negative depth", "use 0 (no drafting) or more")
            expected = hi + 1
        if max(depth for _, _, depth in ranges) < 1:
            raise ScheduleError("every range has depth 0: the schedule never drafts", "use drafter=none instead")
        return cls(tuple(ranges))

    @classmethod
    def load(cls, path: Path) -> Schedule:
        """schedule.json: ``{"schedule": [[...], ...], ...}`` (what tuning writes) or a bare list."""
        try:
            data = json.loads(path.read_text())
        except OSError as exc:
            raise ScheduleError(f"cannot read {path}: {exc.strerror}", "give the path of a schedule.json") from exc
        except json.JSONDecodeError as exc:
            raise ScheduleError(f"{path} is not JSON ({exc.msg})", "give the path of a schedule.json") from exc
        return cls.parse(data["schedule"] if isinstance(data, dict) and "schedule" in data else data)

    def depth(self, batch: int) -> int:
        """The depth at ``batch`` running requests; past the last range, the last range's (as vLLM does)."""
        for lo, hi, depth in self.ranges:
            if lo <= batch <= hi:
                return depth
        return self.ranges[-1][2]

    @property
    def max_batch(self) -> int:
        return self.ranges[-1][1]

    @property
    def max_depth(self) -> int:
        return max(depth for _, _, depth in self.ranges)

    @property
    def depths(self) -> list[int]:
        return sorted({depth for _, _, depth in self.ranges})

    def as_list(self) -> list[list[int]]:
        return [list(r) for r in self.ranges]

    def override(self) -> str:
        """The command-line setting: ``drafter.schedule=[[1,4,5],[5,16,2]]``."""
        return "drafter.schedule=" + json.dumps(self.as_list(), separators=(",", ":"))

    def sglang_adaptive(self) -> dict[str, dict[str, list[int]]]:
        """SGLang's ``--speculative-adaptive-config`` JSON: one batch bucket per range, keyed by its first
        batch (SGLang routes a batch to the largest key at or below it), each pinned to one candidate
        depth so its acceptance tracker has nowhere to move (sglang/srt/speculative/adaptive_spec_params.py)."""
        return {str(lo): {"candidate_steps": [depth]} for lo, _, depth in self.ranges}


def _given(value: Any) -> Schedule:
    """A schedule from what a config holds (a path, ranges, or OmegaConf's list of them)."""
    if isinstance(value, str | Path):
        return Schedule.parse(value)
    return Schedule.parse([[int(v) for v in entry] for entry in value])


def validation_batches(value: Any) -> str:
    """``+sweep=validate_schedule``'s batches: both edges of every range (each threshold's two sides)."""
    edges = sorted({b for lo, hi, _ in _given(value).ranges for b in (lo, hi)})
    return ",".join(map(str, edges))


def validation_arms(value: Any) -> str:
    """``+sweep=validate_schedule``'s arms as ``drafter.fixed_depth`` values: null (the schedule itself),
    then each depth the schedule drafts (the baseline, no speculation, is added by baseline=auto)."""
    return ",".join(["null", *(str(d) for d in _given(value).depths if d > 0)])


def validation_depth(fixed: Any, value: Any) -> int:
    """The depth an arm of ``+sweep=validate_schedule`` drafts at most, for its recorded num_steps:
    its fixed depth, else the schedule's largest, else 0 (the baseline, which has neither)."""
    if fixed is not None:
        return int(fixed)
    return 0 if value is None else _given(value).max_depth
