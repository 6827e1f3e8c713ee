"""``mode: crossover``: the break-even batch found adaptively rather than by a grid.

Both arms (drafter=none and the configured drafter) are measured at the range's ends and its middle
(log scale: the ends alone only draw a straight line), then one batch at a time where
specexp.report.breakeven says it narrows the break-even's 95% interval most, until
the interval lies between adjacent measured batches (the resolution), outside the range, as narrow
as the noise allows, or the budget (``max_points``) is spent. With ``input_lens`` the search runs at
each context length (random prompts' workload.input_len, or a dataset's workload.length_bucket)
side by side, each launch measuring every unfinished search's next batch, and the sweep draws the
map of speedup over batch and context length (specexp.report.crossover_map).

Every launch holds both arms at one or more batches, their windows taking turns; under the basic
launcher the two servers stay up from one launch to the next (``servers.keep_up``), so the whole
search is two server launches. A resumed search (``resume=latest``) reads the points its folder
holds, makes the same choices again from them and measures only what is missing.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import math
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

from specexp import servers, tracking
from specexp.config import Config, ConfigError, CrossoverConf
from specexp.console import console, invalid_config_exits
from specexp.report import breakeven
from specexp.report.breakeven import NOISE, SEARCHING, Points, Search, Step, median_rule
from specexp.report.crossover_points import BUCKET, FAILED, INPUT_LEN, UNSETTLED, Believed, believed, context_of
from specexp.result import BASELINE, PointResult
from specexp.sweep.grid import SweepFailed
from specexp.sweep.job_plan import Job
from specexp.sweep.names import point_names, sweep_params
from specexp.sweep.skeleton import LaunchingSweeper, SweepRun


def _drafter_override(override: str) -> bool:
    return override.lstrip("+~").split("=", 1)[0].split(".", 1)[0] == "drafter"


def answer(step: Step, search: Search, found: Believed) -> str:
    """The search's answer in words (breakeven.describe), with the batches it set aside and why."""
    text = breakeven.describe(step, search, len(found.measured))
    if step.status == UNSETTLED:  # an end that did not settle: the search cannot go on from it
        cost = text.split("; ", 1)[1]
        text = (
            f"break-even between {step.lo:.1f} and {step.hi:.1f} (95%) when an end of the range did not settle; {cost}"
        )
    return f"{text}; {found.words()}" if found.aside else text


def middle(search: Search, skip: Collection[int]) -> int | None:
    """The batch inside the range nearest its middle on a log scale (the geometric mean of its
    ends), other than those in ``skip``; None when the range holds no other batch."""
    inside = [b for b in range(search.batch_min + 1, search.batch_max) if b not in skip]
    centre = (math.log2(search.batch_min) + math.log2(search.batch_max)) / 2
    return min(inside, key=lambda b: (abs(math.log2(b) - centre), b), default=None)


def steer(found: Believed, search: Search, tried: set[int]) -> Step:
    """The search's next move from the batches it may believe (breakeven.next_step). Measured at its
    two ends alone, it measures the middle of the range next (log scale): an interval from the ends
    alone is a straight line drawn between them, and steering on it would refine around a crossing
    no measurement inside supports. A set-aside batch spends the budget but never steers: it is not
    measured again, and a search left with only set-aside batches to measure ends there (at an end
    of the range: it cannot go on)."""
    spent = [b for b in found.aside if b not in found.points]  # the curve-breakers count among points
    budget = dataclasses.replace(search, max_points=search.max_points - len(spent))

    def rule(drawn: np.ndarray, options: Sequence[int], points: Points) -> int:
        return median_rule(drawn, [b for b in options if b not in found.aside] or options, points)

    step = breakeven.next_step(found.points, budget, rule)
    ends = (search.batch_min, search.batch_max)
    if step.batch is not None and step.batch not in ends and set(found.points) <= set(ends):
        centre = middle(search, {*found.aside, *tried})
        step = Step(centre, SEARCHING, step.lo, step.hi) if centre is not None else step
    if step.batch is None or (step.batch not in found.aside and step.batch not in tried):
        return step
    why = found.aside.get(step.batch, FAILED)
    if step.batch in (search.batch_min, search.batch_max):
        return Step(None, UNSETTLED if why == UNSETTLED else FAILED, step.lo, step.hi)
    return Step(None, FAILED if why == FAILED else NOISE, step.lo, step.hi)


class CrossoverSearch:
    """The search (or, with several input lengths, the searches) as a sweep on a sweeper's skeleton."""

    def __init__(
        self,
        sweeper: LaunchingSweeper,
        conf: CrossoverConf,
        params: dict[str, str],
    ) -> None:
        self.sweeper = sweeper
        self.conf = conf
        self.search = Search(conf.batch_min, conf.batch_max, conf.resolution, conf.max_points)
        self.params = params
        self.lens: list[str | None] = list(conf.input_lens) or [None]
        self.key = BUCKET if conf.buckets else INPUT_LEN  # what each of input_lens sets
        self.axis = self.key.removeprefix("workload.")  # its name in words and metric names
        self.steps: dict[str | None, Step] = {}

    def jobs(self, base: list[str], batch: int, length: str | None) -> list[list[str]]:
        """Both arms at one batch (and context length): the baseline first."""
        at = [f"batch={batch}", *([f"{self.key}={length}"] if length is not None else [])]
        baseline = [o for o in base if not _drafter_override(o)] + [f"drafter={BASELINE}"]
        return [[*baseline, *at], [*base, *at]]

    def check(self, first: Config) -> None:
        """What a search needs of the configuration, before any server starts."""
        if not first.drafter.speculative:
            raise ConfigError(
                "drafter", f"{first.drafter.name} does not speculate", "name the drafter to search, e.g. drafter=tiny"
            )
        if first.load.kind != "closed":
            raise ConfigError("load", "the search varies the batch of a closed loop", "use load=closed")
        if self.conf.input_lens and (first.workload.kind == "random") == self.conf.buckets:
            what = (
                "length buckets pick a dataset's prompts" if self.conf.buckets else "prompt lengths set random prompts"
            )
            raise ConfigError(
                "hydra.sweeper.crossover.input_lens",
                f"{what}, and workload.kind is {first.workload.kind}",
                "give token counts (e.g. [16,128,512]) for workload=random, "
                "length buckets (e.g. [0-128,128-512]) for a dataset workload",
            )

    def plan(self, base: list[str], wanted: list[tuple[int, str | None]], sweep_id: str) -> list[Job]:
        """The jobs for ``wanted`` (batch, length) pairs, planned beside the range's largest batch so
        that every launch sizes its servers alike (max_batch = batch_max) and finds them up; an
        invalid job ends the sweep before any server starts (exit 2)."""
        sizing = [s for s in [(self.search.batch_max, self.lens[0])] if s not in wanted]
        jobs = [job for b, n in [*wanted, *sizing] for job in self.jobs(base, b, n)]
        with invalid_config_exits():
            planned = self.sweeper.plan(jobs, sweep_id, point_names(jobs, ["drafter", "batch", self.key]))
        keep = [job for b, n in wanted for job in self.jobs(base, b, n)]
        return [j for j in planned if any(j.overrides[: len(k)] == k for k in keep)]

    def rows(self, run: SweepRun, length: str | None) -> list[PointResult]:
        points = run.points()
        return points if length is None else [r for r in points if context_of(r) == length]

    def believed(self, run: SweepRun, length: str | None) -> Believed:
        """The batches measured so far at ``length``, inside the range: those that may steer the
        search, and those set aside (failed, unsettled, breaking the curve)."""
        return believed(self.rows(run, length), self.search.batch_min, self.search.batch_max)

    def sweep(self, arguments: list[str]) -> SweepRun:
        base = [*self.sweeper.job_arguments(arguments), *(f"{k}={v}" for k, v in self.params.items())]
        with invalid_config_exits():
            first = self.sweeper.compose(base)
            self.check(first)
        run = self.sweeper.new_run()
        ends = [(b, n) for n in self.lens for b in (self.search.batch_min, self.search.batch_max)]
        planned = self.plan(base, ends, run.sweep_id)  # every setting checked before any server starts
        run.name = (
            f"{first.engine.name}/{first.model.name}: break-even search, drafter {first.drafter.name} "
            f"× batch {self.search.batch_min}–{self.search.batch_max}"
        )
        what = {
            "drafter": f"{BASELINE},{first.drafter.name}",
            "batch": f"{self.search.batch_min}–{self.search.batch_max}",
        }
        if self.conf.input_lens:
            what[self.key] = ",".join(self.conf.input_lens)
            run.name += f" × {self.axis} {what[self.key]}"
            run.settings = [self.key]  # a column of summary.csv and the tables: which context length
        run.params = sweep_params(first, what) | {
            f"crossover.{k}": str(getattr(self.conf, k)) for k in ("batch_min", "batch_max", "resolution", "max_points")
        }
        run.summarize = lambda: self.summarize(run)

        def body(run: SweepRun) -> None:
            kept = contextlib.nullcontext() if self.sweeper.parallel else servers.keep_up(2)
            with kept:
                self.launch(run, self.sweeper.remaining(run, planned))
                tried = set(ends)
                while not first.dry_run and (wanted := self.next_batches(run, tried)):
                    tried |= set(wanted)
                    self.launch(run, self.sweeper.remaining(run, self.plan(base, wanted, run.sweep_id)))

        self.sweeper.record(run, first, body)
        if any(r.status not in ("ok", "dry_run") for r in run.points()):
            raise SweepFailed(1)
        if run.recorder is not None and run.recorder.untracked:
            raise SweepFailed(tracking.TRACKING_FAILED)
        return run

    def launch(self, run: SweepRun, jobs: list[Job]) -> None:
        if jobs:
            self.sweeper.launch(run, jobs)

    def next_batches(self, run: SweepRun, tried: set[tuple[int, str | None]]) -> list[tuple[int, str | None]]:
        """Each unfinished search's next batch (``steer``: set-aside batches never steer it, and a
        batch tried already is not measured again)."""
        wanted = []
        for n in self.lens:
            if n in self.steps and self.steps[n].batch is None:
                continue  # this search has ended
            found = self.believed(run, n)
            step = self.steps[n] = steer(found, self.search, {b for b, m in tried if m == n})
            where = f" at {self.axis} {n}" if n is not None else ""
            if step.batch is None:
                if found.aside:
                    console.print(f"crossover search{where}: {found.words()}; the search ends ({step.status})")
                continue
            console.print(
                f"crossover search{where}: break-even between {step.lo:.1f} and {step.hi:.1f} (95%) so far; "
                f"measuring batch {step.batch}"
            )
            wanted.append((step.batch, n))
        return wanted

    def summarize(self, run: SweepRun) -> tuple[dict[str, float], list[Path], list[str]]:
        """crossover.csv (one row per search), the map (several input lengths), the parent's
        metrics: batches and points used against the grid's, and the interval; the answer in words."""
        metrics: dict[str, float] = {"crossover.grid_batches": len(self.search.grid)}
        answer_lines, table = [], []
        for n in self.lens:
            found = self.believed(run, n)
            step = self.steps.get(n)
            if step is None or step.status == SEARCHING:  # interrupted, or a dry run: where it stood
                step = steer(found, self.search, set()) if len(found.measured) >= 2 else Step(None, SEARCHING)
                if step.batch is not None:
                    step = Step(None, SEARCHING, step.lo, step.hi)
            measured = found.measured
            suffix = f".{self.axis}{n}" if n is not None else ""
            metrics |= {f"crossover.batches{suffix}": len(measured), f"crossover.points{suffix}": 2 * len(measured)}
            metrics |= {f"crossover.set_aside{suffix}": len(found.aside)}
            metrics |= {f"crossover.{k}{suffix}": v for k, v in (("lo", step.lo), ("hi", step.hi)) if math.isfinite(v)}
            words = answer(step, self.search, found)
            answer_lines.append(f"{self.axis} {n}: {words}" if n is not None else words)
            aside = " ".join(f"{b}:{why.replace(' ', '_')}" for b, why in found.aside.items())
            table.append(
                [
                    n if n is not None else "",
                    step.status,
                    step.lo,
                    step.hi,
                    len(measured),
                    " ".join(map(str, measured)),
                    aside,
                ]
            )
        path = run.sweep_dir / "crossover.csv"
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["input_len", "status", "lo", "hi", "batches", "measured", "set_aside", "grid_batches"])
            w.writerows([*row, len(self.search.grid)] for row in table)
        files = [path]
        if len(self.lens) > 1:
            from specexp.report.crossover_map import draw_map  # matplotlib: only when a map is drawn

            figure = draw_map(run.points(), run.sweep_dir / "plots" / "crossover_map.png")
            files += [figure] if figure is not None else []
        return metrics, files, answer_lines
