"""A deployable depth schedule from a sweep's points: the best depth at each measured batch, adjacent
batches merged where one depth is within the interval of the best at all of them.

The points are those of a grid over ``drafter.num_steps`` x ``batch`` or of ``+sweep=tune_schedule``;
the baseline (``drafter=none``) is depth 0, so a batch where speculation does not pay drafts nothing.
A depth is compared with the batch's best by the ratio of their objectives, made as the verdict makes
a speedup (specexp.report.analysis.ratio_estimates): paired where the two depths' windows took turns
(the mean log ratio of partners), else unpaired, each arm's windows pooled (tokens over seconds, Welch
df: ``pooled_ratio``); a depth whose ratio stats.side cannot place above or below 1 cannot be told
from the best. schedule.json says how each ratio was made. A batch whose best was measured in one
window only has no interval: its range says it is a guess. Batches between two measured ones take the
depth of the range above them (its first measured batch), and schedule.json says which were not measured.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specexp.depth_schedule import Schedule
from specexp.metrics.stats import Estimate, combine, ratio, side
from specexp.report.analysis import RATIOS, arms_ratio, launch, metric_estimate, ratio_estimates
from specexp.result import PointResult

HOW = (
    "each depth against the batch's best as a ratio with its 95% interval: paired (the mean log ratio of "
    "windows that took turns, Student-t over the pairs) where the two arms' windows alternated, else unpaired "
    "(each arm's windows pooled, tokens over seconds, Welch df), each ratio naming its method: a "
    "depth whose ratio interval holds 1 cannot be told apart from the best"
)
# Two arms' rows at one batch -> the ratio of their objectives and how it was made (paired | unpaired).
Compare = Callable[[Sequence[PointResult], Sequence[PointResult]], tuple[Estimate, str]]


def _set(row: PointResult, key: str) -> bool:
    """Whether a setting is given (params as flattened from the config, or as MLflow's strings)."""
    return str(row.params.get(key)) not in ("None", "null", "")


def depth_of(row: PointResult) -> int | None:
    """The fixed chain depth the point drafted (0: no speculation); None for trees, scheduled points and
    an external server's (its depth unknown).
    Params are the config as given: drafter.fixed_depth replaces num_steps and the schedule."""
    if not row.speculative:
        return 0
    if _set(row, "drafter.fixed_depth"):
        return int(float(row.params["drafter.fixed_depth"]))
    if scheduled(row) or int(float(row.params.get("drafter.topk", 1) or 1)) != 1:
        return None
    steps = row.params.get("drafter.num_steps")  # absent where the server's speculation is only named
    return None if steps is None else int(float(steps))


def scheduled(row: PointResult) -> bool:
    """Whether the point ran a depth schedule."""
    return row.speculative and _set(row, "drafter.schedule") and not _set(row, "drafter.fixed_depth")


def usable(row: PointResult, objective: str) -> bool:
    return (
        row.ok
        and row.load == "closed"
        and row.metrics.get(objective) is not None
        and row.tags.get("optuna.feasible") != "false"
    )


def arms(rows: Sequence[PointResult], objective: str) -> dict[int, dict[int, list[PointResult]]]:
    """batch -> depth -> the rows (launches, trials) that measured the objective there."""
    out: dict[int, dict[int, list[PointResult]]] = {}
    for row in rows:
        depth = depth_of(row) if usable(row, objective) else None
        if depth is not None and metric_estimate(row, objective) is not None:
            out.setdefault(row.batch, {}).setdefault(depth, []).append(row)
    return out


def pooled(rows: Sequence[PointResult], objective: str) -> Estimate:
    """One arm's objective, its launches (and trials) combined."""
    return combine([est for r in rows if (est := metric_estimate(r, objective)) is not None])


def measured(rows: Sequence[PointResult], objective: str) -> dict[int, dict[int, Estimate]]:
    """batch -> depth -> the objective's estimate; launches (and trials) of one depth combined."""
    return {b: {d: pooled(rs, objective) for d, rs in by.items()} for b, by in arms(rows, objective).items()}


def one_arm(rows: Sequence[PointResult]) -> PointResult:
    """An arm measured on several launches (or trials) as one point: their windows, in order (no
    recorded metrics: those were each launch's own)."""
    return rows[0] if len(rows) == 1 else replace(rows[0], windows=[w for r in rows for w in r.windows], metrics={})


def pooled_ratio(mine: Sequence[PointResult], theirs: Sequence[PointResult], metric: str) -> Estimate | None:
    """``metric`` of one arm over another's, unpaired, as the verdict makes a ratio (analysis.arms_ratio):
    each arm's windows over all its launches pooled (tokens over seconds), Welch's degrees of freedom;
    a metric without windows' sums, the recorded values of one point each. None where a point has no
    windows (read back from MLflow) or the ratio cannot be made so."""
    if not mine or not theirs or not all(r.windows for r in (*mine, *theirs)):
        return None
    found = arms_ratio(one_arm(mine), one_arm(theirs), metric)
    return None if found is None else found[0]


def comparer(objective: str) -> Compare:
    """How two arms are compared on ``objective``, as the verdict compares a drafter with its baseline:
    the paired ratio (analysis.ratio_estimates) where, in every launch of one arm, its windows took turns
    with the other arm's in the same launch, combined over launches; else unpaired, each arm's windows
    pooled (``pooled_ratio``), or where they are not known the ratio of the arms' recorded estimates."""
    key = next((k for k, metric in RATIOS["closed"] if metric == objective), None)

    def compare(mine: Sequence[PointResult], theirs: Sequence[PointResult]) -> tuple[Estimate, str]:
        partner = {launch(r): r for r in theirs if r.windows}
        parts = []
        for row in mine if key is not None else ():
            base = partner.get(launch(row))
            used, _, pairs = ratio_estimates(row, base) if row.windows and base is not None else ({}, {}, 0)
            if pairs < 2 or key not in used:
                break
            parts.append(used[key])
        else:
            if parts:
                return combine(parts), "paired"
        found = pooled_ratio(mine, theirs, objective)
        return (ratio(pooled(mine, objective), pooled(theirs, objective)) if found is None else found), "unpaired"

    return compare


@dataclass
class BatchBest:
    batch: int
    estimates: dict[int, Estimate]
    best: int
    ties: list[int]  # depths that cannot be told apart from the best (best included)
    guess: bool  # the best has no interval (one window): nothing can be told apart
    to_best: dict[int, tuple[Estimate, str]] = field(default_factory=dict)  # depth -> its ratio to the best, how

    def loss(self, depth: int, maximize: bool) -> float:
        """How far ``depth``'s objective is from the best, as a fraction (0 at the best)."""
        r = self.estimates[depth].value / self.estimates[self.best].value
        return 1 - r if maximize else r - 1


def judge(
    batch: int,
    estimates: dict[int, Estimate],
    maximize: bool,
    versus: Callable[[int, int], tuple[Estimate, str]],
) -> BatchBest:
    """The best depth at one batch (on its interval's conservative end, as the tuner picks) and its ties:
    the depths whose ratio to the best (``versus(depth, best)``) stats.side cannot
    place above or below 1."""
    best = max(estimates, key=lambda d: estimates[d].lo if maximize else -estimates[d].hi)
    top = estimates[best]
    ties, to_best = [], {}
    for depth in sorted(estimates):
        if depth != best and top.value:
            to_best[depth] = versus(depth, best)
        r = to_best[depth][0] if depth in to_best else Estimate(1.0)
        if depth == best or (r.known and side(r) == 0):
            ties.append(depth)
    return BatchBest(batch, estimates, best, ties, guess=not top.known, to_best=to_best)


def judged(rows: Sequence[PointResult], objective: str, maximize: bool) -> dict[int, BatchBest]:
    """Every measured batch's best depth and ties, each depth compared with the best by ``comparer``."""
    compare = comparer(objective)
    out = {}
    for batch, by in sorted(arms(rows, objective).items()):
        estimates = {d: pooled(rs, objective) for d, rs in by.items()}
        out[batch] = judge(batch, estimates, maximize, lambda d, b, by=by: compare(by[d], by[b]))
    return out


@dataclass
class Range:
    batches: list[int]  # measured batches in the range
    depth: int
    first: int  # batch_from (unmeasured batches below the first measured one included)
    last: int

    def basis(self, bests: dict[int, BatchBest]) -> str:
        """In words: whether the depth is the best, a tie, or a guess at each measured batch."""
        words = []
        for b in self.batches:
            bb = bests[b]
            if bb.guess:
                words.append(f"batch {b}: a guess (one window, no interval)")
            elif bb.best != self.depth:
                words.append(f"batch {b}: within the interval of depth {bb.best}'s best")
            elif len(bb.ties) > 1:
                others = ", ".join(str(d) for d in bb.ties if d != self.depth)
                words.append(f"batch {b}: best, not told apart from depth {others}")
            else:
                words.append(f"batch {b}: best at 95%")
        return "; ".join(words)


def merge(bests: list[BatchBest], maximize: bool) -> list[Range]:
    """Adjacent batches share a range while some depth ties the best at each of them; the range's
    depth is, of those, the one that loses least at its worst batch. A guess never merges."""
    ranges: list[Range] = []
    common: set[int] = set()
    group: list[BatchBest] = []

    def close() -> None:
        depth = min(sorted(common), key=lambda d: max(g.loss(d, maximize) for g in group))
        first = ranges[-1].last + 1 if ranges else 1
        ranges.append(Range([g.batch for g in group], depth, first, group[-1].batch))

    for bb in bests:
        ties = {bb.best} if bb.guess else set(bb.ties)
        if group and not group[-1].guess and not bb.guess and common & ties:
            common &= ties
            group.append(bb)
            continue
        if group:
            close()
        common, group = set(ties), [bb]
    if group:
        close()
    return ranges


def build(rows: Sequence[PointResult], objective: str, maximize: bool) -> dict[str, Any] | None:
    """schedule.json's content, or None when the points measure fewer than one depth at two batches."""
    table = judged(rows, objective, maximize)
    if len(table) < 2 or not any(len(v.estimates) > 1 for v in table.values()):
        return None
    launches = min(len(rs) for by in arms(rows, objective).values() for rs in by.values())
    bests = list(table.values())
    ranges = merge(bests, maximize)
    schedule = Schedule(tuple((r.first, r.last, r.depth) for r in ranges))
    pays = schedule.max_depth > 0  # else no depth beats no speculation anywhere: nothing to deploy
    spec = next((r for r in rows if r.speculative and depth_of(r)), None)
    return {
        "schedule": schedule.as_list(),
        "objective": objective,
        "direction": "maximize" if maximize else "minimize",
        "engine": spec.engine if spec else "",
        "model": spec.model if spec else "",
        "drafter": spec.drafter if spec else "",
        "intervals": HOW,
        "launches": launches,  # the fewest server launches behind one depth at one batch
        "ranges": [
            {
                "batch_from": r.first,
                "batch_to": r.last,
                "depth": r.depth,
                "measured": r.batches,
                "not_measured": [b for b in range(r.first, r.last + 1) if b not in table],
                "guess": any(table[b].guess for b in r.batches),
                "basis": r.basis(table),
            }
            for r in ranges
        ],
        "per_batch": {
            str(b.batch): {
                "best": b.best,
                "ties": b.ties,
                "depths": {
                    str(d): {"value": e.value, "ci95": e.half, **_to_best(b.to_best.get(d))}
                    for d, e in sorted(b.estimates.items())
                },
            }
            for b in bests
        },
        "override": schedule.override() if pays else None,
        "vllm": {
            "num_speculative_tokens": schedule.max_depth,
            "num_speculative_tokens_per_batch_size": schedule.as_list(),
        }
        if pays
        else None,
        "sglang_adaptive_config": schedule.sglang_adaptive() if pays else None,
    }


def _to_best(compared: tuple[Estimate, str] | None) -> dict[str, Any]:
    """A depth's ratio to the batch's best as schedule.json records it, with how it was made."""
    if compared is None:
        return {}
    r, method = compared
    return {"ratio_to_best": {"value": r.value, "lo": r.lo, "hi": r.hi, "method": method}}


def lines(data: dict[str, Any], path: Path) -> list[str]:
    """The schedule in words, and what to paste: specexp's setting, vLLM's and SGLang's."""
    shown = []
    for r in data["ranges"]:
        span = (
            f"batch {r['batch_from']}-{r['batch_to']}"
            if r["batch_from"] != r["batch_to"]
            else f"batch {r['batch_from']}"
        )
        gap = f"; batch {','.join(map(str, r['not_measured']))} not measured" if r["not_measured"] else ""
        shown.append(f"{span}: depth {r['depth']} ({r['basis']}{gap})")
    head = f"depth schedule for {data['objective']} ({path}): " + " | ".join(shown)
    if data.get("launches") == 1:
        head += f" ({ONE_LAUNCH})"
    if data["override"] is None:
        return [head, "speculation pays at no measured batch: serve drafter=none (no schedule to deploy)"]
    vllm = json.dumps(data["vllm"], separators=(",", ":"))
    sglang = json.dumps(data["sglang_adaptive_config"], separators=(",", ":"))
    return [
        head,
        f"use it: {data['override']}  (or drafter.schedule={path})",
        f"vLLM: add to --speculative-config {vllm}",
        f"SGLang (EAGLE/EAGLE3): --speculative-adaptive --speculative-adaptive-config <a file holding {sglang}>",
    ]


def write(
    rows: Sequence[PointResult], sweep_dir: Path, objective: str = "output_throughput", maximize: bool = True
) -> tuple[list[Path], list[str]]:
    """schedule.json in the sweep folder (the recorder uploads it to the parent run) and its lines;
    nothing when the points hold no schedule. A sweep that ran a schedule gets its verdict instead."""
    if any(scheduled(r) for r in rows):
        return [], validation(rows, objective, maximize)
    data = build(rows, objective, maximize)
    if data is None:
        return [], []
    path = sweep_dir / "schedule.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    return [path], lines(data, path)


def add_to(
    summary: tuple[dict[str, float], list[Path], list[str]],
    rows: Sequence[PointResult],
    sweep_dir: Path,
    objective: str = "output_throughput",
    maximize: bool = True,
) -> tuple[dict[str, float], list[Path], list[str]]:
    """A sweep's summary (parent metrics, files, answer lines) with the schedule its points hold."""
    metrics, files, answer = summary
    more_files, more_lines = write(rows, sweep_dir, objective, maximize)
    return metrics, [*files, *more_files], [*answer, *more_lines]


# a depth measured on one server launch: its windows' interval holds none of the launches' spread
ONE_LAUNCH = (
    "each depth measured on one server launch: the spread between launches, a few percent on a shared "
    "machine, is not in these intervals; +sweep=validate_schedule with repeats=3 measures it"
)
# what a difference between the schedule and a static arm of its own depth can be, and how to tell
AA_DIFFERENCE = (
    "the schedule's own machinery, or the two servers' speeds differing launch to launch by more than their "
    "windows show (repeats=3 measures that spread)"
)


def validation(rows: Sequence[PointResult], objective: str = "output_throughput", maximize: bool = True) -> list[str]:
    """+sweep=validate_schedule's verdict: at each batch, the schedule against the best static depth
    (no speculation included) as a ratio with its 95% interval; then any drop in the schedule's
    objective across one of its thresholds (batch_to of a range to batch_from of the next)."""
    ran: dict[int, list[PointResult]] = {}
    plan: Schedule | None = None
    for row in rows:
        if scheduled(row) and usable(row, objective) and metric_estimate(row, objective) is not None:
            ran.setdefault(row.batch, []).append(row)
            plan = plan or Schedule.parse(_ranges(row.params["drafter.schedule"]))
    static = arms(rows, objective)
    if not ran or plan is None:
        return []
    compare, table = comparer(objective), judged(rows, objective, maximize)
    better, worse = (">", "<") if maximize else ("<", ">")
    out, tally = [], {"beats": [], "ties": [], "loses": []}
    for batch in sorted(ran):
        if batch not in static:
            continue
        best = table[batch]
        r, method = compare(ran[batch], static[batch][best.best])
        where = side(r) if maximize else -side(r)  # +1: the schedule is better at 95%
        if not r.known:
            word = "ties"
            how = "no interval (one window): a guess"
        elif where > 0:
            word = "beats"
            how = f"{better} at 95%"
        elif where == 0:
            word = "ties"
            how = "within the 95% interval"
        else:
            word = "loses"
            how = f"{worse} at 95%"
        tally[word].append(batch)
        if plan.depth(batch) == best.best:  # one engine setting measured twice: the ratio's truth is 1
            how += "; the same depth, so an A/A check" + ("" if word == "ties" else f": {AA_DIFFERENCE}")
        how += _off_range(batch, plan.depth(batch), ran[batch], static[batch].get(plan.depth(batch), []))
        out.append(
            f"batch {batch}: the schedule (depth {plan.depth(batch)}) {word} the best static depth {best.best} "
            f"({objective} ratio {r.value:.3f} [{r.lo:.3f}, {r.hi:.3f}] {method}, {how})"
        )
    for (_, hi, _), (lo, _, _) in zip(plan.ranges, plan.ranges[1:], strict=False):
        if hi in ran and lo in ran:
            step, method = compare(ran[lo], ran[hi])
            dropped = side(step) < 0 if maximize else side(step) > 0
            if step.known and dropped:
                out.append(
                    f"threshold {hi}->{lo}: the schedule's {objective} drops across it "
                    f"(x{step.value:.3f} [{step.lo:.3f}, {step.hi:.3f}] {method}, from batch {hi} to {lo})"
                )
    summary = "; ".join(f"{w} at batch {', '.join(map(str, bs))}" for w, bs in tally.items() if bs)
    return [f"schedule {plan.override()} against the best static depth: {summary} ({HOW})", *out]


# relative difference in draft tokens per draft, schedule against its depth's static arm, beyond the
# tails both share (a row's last steps draft less than the depth): steps that left the batch's range
OFF_RANGE = 0.02


def _drafted(rows: Sequence[PointResult]) -> tuple[float, float] | None:
    """(draft tokens, verify steps that drafted) over an arm's measured windows; None where the engine
    reports no draft counts. A baseline drafted nothing."""
    if rows and not any(r.speculative for r in rows):
        return 0.0, 0.0
    counts = [(r.metrics.get("spec_draft_tokens"), r.metrics.get("spec_verify_steps")) for r in rows]
    if not counts or any(t is None or s is None for t, s in counts):
        return None
    return sum(float(t) for t, _ in counts), sum(float(s) for _, s in counts)  # type: ignore[arg-type]


def _off_range(batch: int, depth: int, mine: Sequence[PointResult], theirs: Sequence[PointResult]) -> str:
    """A clause where the schedule drafted another depth than its static arm at ``batch``: in closed loop a
    request that ends leaves its slot empty until the client's next one arrives, and the steps run
    meanwhile with fewer requests, at the depth of the range below. A schedule whose threshold sits at
    the serving batch pays that depth there, as it would deployed."""
    ours, static = _drafted(mine), _drafted(theirs)
    if ours is None or static is None or not ours[1]:
        return ""
    per, base = ours[0] / ours[1], (static[0] / static[1] if static[1] else 0.0)
    if base and abs(per - base) <= OFF_RANGE * base:
        return ""
    than = f"static depth {depth}'s {base:.2f}" if base else f"none (the schedule drafts nothing at batch {batch})"
    return (
        f"; it drafted {per:.2f} tokens per draft against {than}: some steps ran with fewer requests than "
        f"{batch} (a request ended before its replacement arrived) and drafted the depth of their range"
    )


def _ranges(value: Any) -> Any:
    """drafter.schedule as a point's params hold it: ranges, a path, or MLflow's string of ranges."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        return json.loads(value)
    return value
