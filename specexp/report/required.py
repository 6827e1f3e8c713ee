"""How good must a drafter be? The required-acceptance map from a sweep under synthetic acceptance
(``+sweep=required_acceptance``): the speedup over acceptance length α x batch (x depth K), and its
inverse, α*(B, K), the acceptance length at which speculation breaks even at batch B with depth K.

Speedup rises with α at a fixed batch, so α* is where its reciprocal first falls below 1 along α: the
verdict's first crossing (crossing.crossings, linear in log2 α), with its 95% interval from curves drawn
from every point's sampling distribution (crossing.crossing_bounds over the first crossings, as the
verdict's break-even). α* beyond the largest α measured is +inf (no drafter pays at that batch and
depth); below the smallest, -inf (even that one pays). Real drafters (a speculative arm without
synthetic acceptance, in this sweep or in the rows given with it) are placed on the map by their
measured acceptance length, overall and per prompt category where the points have categories. Beside
the CSV, required_acceptance.json says what the map is valid for (engine, model, hardware): an
ordinary sweep's verdict looks it up there (specexp.report.required_lookup).
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from specexp import atomic
from specexp.metrics.stats import DRAWS, Estimate
from specexp.report.analysis import used_ratios
from specexp.report.category_speedups import category_rows
from specexp.report.crossing import crossing_bounds, crossings
from specexp.result import PointResult

SYNTHETIC_TAG = "specexp.synthetic_acceptance"  # the rates a point accepted by (specexp.engines.synthetic)
HARDWARE_TAG = "specexp.hardware"  # the machine a point ran on (specexp.tracking.hardware)
CSV = "required_acceptance.csv"
VALIDITY = "required_acceptance.json"  # what the map is valid for: its Setting, sweep, date and depths
FIGURE = "required_acceptance.png"


@dataclass(frozen=True)
class Setting:
    """What a map holds for: the engine (with its device, where it has one), the model and the
    machine; ``hardware`` None where a point did not record it (such a map matches nothing)."""

    engine: str
    model: str
    hardware: str | None

    def words(self) -> str:
        return f"{self.engine}, model {self.model}, {self.hardware or 'unrecorded hardware'}"


def setting_of(row: PointResult) -> Setting:
    device = row.params.get("engine.device")
    return Setting(f"{row.engine} on {device}" if device else row.engine, row.model, row.tags.get(HARDWARE_TAG))


@dataclass
class Required:
    """α*(batch, depth) and its 95% interval; ``bottom``, ``top``: the least and most α measured;
    ``points``: α -> the speedup measured there (empty for a map read back from its CSV)."""

    batch: int
    depth: int
    alpha_star: float
    lo: float
    hi: float
    bottom: float
    top: float
    points: dict[float, Estimate] = field(default_factory=dict)

    def words(self) -> str:
        if self.alpha_star == math.inf:
            return f"never pays up to α {self.top:.2f}"
        if self.alpha_star == -math.inf:
            return f"pays from α {self.bottom:.2f} on"
        return f"needs α* {self.alpha_star:.2f} [{_bound(self.lo)}, {_bound(self.hi)}]"


@dataclass
class Placed:
    """A real drafter at one batch (in one prompt category, where ``category`` is set): its measured
    acceptance length and speedup (a category's has no interval)."""

    drafter: str
    batch: int
    depth: int
    alpha: float
    speedup: Estimate | None
    setting: Setting
    category: str | None = None

    @property
    def name(self) -> str:
        return f"{self.drafter} ({self.category})" if self.category else self.drafter

    def judged(self, req: Required) -> str:
        """Whether its α is enough at ``req``; "cannot tell" where α lies inside α*'s interval, or
        where the speedup this sweep measured there says the opposite (a loss measured at an α above
        α*, a gain below it): a contradiction stated, not hidden."""
        above = self.alpha >= req.alpha_star
        s = self.speedup
        if s is not None and s.known and (s.hi < 1 if above else s.lo > 1):
            what = "a loss above α*" if above else "a gain below α*"
            return f"cannot tell: it measured {what}, speedup {speedup_words(s)}"
        if req.lo <= self.alpha <= req.hi:
            return "cannot tell: inside α*'s interval"
        return "enough" if above else "short of it"


def speedup_words(s: Estimate) -> str:
    return f"{s.value:.2f} [{s.lo:.2f}, {s.hi:.2f}]" if s.known else f"{s.value:.2f}"


def _bound(x: float) -> str:
    return {math.inf: "∞", -math.inf: "−∞"}.get(x, f"{x:.2f}")


def alpha_of(row: PointResult) -> float | None:
    """The acceptance length a synthetic point was asked for (1 + the sum of its rates); None for a
    real drafter's point."""
    rates = row.tags.get(SYNTHETIC_TAG)
    return 1.0 + sum(float(r) for r in rates.split(",")) if rates else None


def depth_of(row: PointResult) -> int:
    return int(float(row.params.get("drafter.num_steps", 0)))


def surface(rows: Sequence[PointResult]) -> dict[tuple[int, int], dict[float, Estimate]]:
    """(batch, depth) -> α (the acceptance length the point measured) -> the speedup over its
    drafter=none baseline (paired where the arms' windows took turns), for every synthetic point."""
    out: dict[tuple[int, int], dict[float, Estimate]] = {}
    for i, ratios in used_ratios(rows).items():
        if alpha_of(rows[i]) is not None and "speedup" in ratios:
            # measured rather than asked: a stream's last steps draft fewer than K tokens (its max_tokens)
            alpha = rows[i].metrics.get("accept_length") or alpha_of(rows[i])
            out.setdefault((rows[i].batch, depth_of(rows[i])), {})[alpha] = ratios["speedup"]
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def break_even_alpha(points: dict[float, Estimate], draws: int = DRAWS) -> tuple[float, float, float]:
    """(α*, lo, hi): where the speedup first reaches 1 along α, and its 95% interval (module doc)."""
    alphas = sorted(points)
    inverse = np.array([[1.0 / max(points[a].value, 1e-12) for a in alphas]])
    (star,), _ = crossings(alphas, inverse)
    rng = np.random.default_rng(0)
    drawn = np.column_stack([points[a].draws(rng, draws) for a in alphas])
    with np.errstate(divide="ignore"):
        first, _ = crossings(alphas, np.where(drawn > 0, 1.0 / drawn, np.inf))
    lo, hi = crossing_bounds(first, first)
    return float(star), lo, hi


def required(rows: Sequence[PointResult]) -> list[Required]:
    """α*(B, K) at every (batch, depth) measured at two or more acceptance lengths."""
    return [
        Required(b, k, *break_even_alpha(points), min(points), max(points), points)
        for (b, k), points in surface(rows).items()
        if len(points) >= 2
    ]


def placed(rows: Sequence[PointResult]) -> list[Placed]:
    """Every real drafter's point (speculative, not synthetic) with a measured acceptance length, then
    its prompt categories' (``accept_length.<category>``) where it has them."""
    speedups = used_ratios(rows)
    out = []
    for i, r in enumerate(rows):
        if r.ok and r.speculative and alpha_of(r) is None and "accept_length" in r.metrics:
            speedup = speedups.get(i, {}).get("speedup")
            out.append(Placed(r.drafter, r.batch, depth_of(r), r.metrics["accept_length"], speedup, setting_of(r)))
    for c in category_rows([r for r in rows if alpha_of(r) is None]):
        if c.accept_length is not None and "accept_length" in c.point.metrics:
            r, speedup = c.point, None if c.speedup is None else Estimate(c.speedup)
            out.append(Placed(r.drafter, r.batch, depth_of(r), c.accept_length, speedup, setting_of(r), c.category))
    return out


def table(found: Sequence[Required], real: Sequence[Placed]) -> list[str]:
    """``at batch B (depth K): needs α* a [lo, hi]; tiny has α 2.31 (enough); tiny (code) has α 1.90
    (short of it)``, one line per batch and depth; then, per batch measured at several depths, the
    depth that needs the least."""
    lines = []
    for req in found:
        line = f"at batch {req.batch} (depth {req.depth}): {req.words()}"
        for p in real:
            if (p.batch, p.depth) == (req.batch, req.depth):
                line += f"; {p.name} has α {p.alpha:.2f} ({p.judged(req)})"
        lines.append(line)
    by_batch: dict[int, list[Required]] = {}
    for req in found:
        by_batch.setdefault(req.batch, []).append(req)
    for b, reqs in by_batch.items():
        if len(reqs) > 1:
            best = min(reqs, key=lambda r: r.alpha_star)
            lines.append(f"at batch {b} the depth that needs the least acceptance is {best.depth} ({best.words()})")
    return lines


def write_csv(found: Sequence[Required], path: Path) -> Path:
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["batch", "depth", "alpha_star", "lo", "hi", "alpha_min", "alpha_max"])
        for r in found:
            out.writerow([r.batch, r.depth, r.alpha_star, r.lo, r.hi, r.bottom, r.top])
    return path


def read_csv(path: Path) -> list[Required]:
    """A map as ``write_csv`` stored it (without its points)."""
    with path.open(newline="") as f:
        return [
            Required(
                int(r["batch"]),
                int(r["depth"]),
                *(float(r[k]) for k in ("alpha_star", "lo", "hi")),
                float(r["alpha_min"]),
                float(r["alpha_max"]),
            )
            for r in csv.DictReader(f)
        ]


def write_validity(rows: Sequence[PointResult], found: Sequence[Required], folder: Path) -> Path | None:
    """required_acceptance.json: the one Setting the synthetic points share, the sweep and when; None
    (and an older record removed) where they share none: such a map is valid for nothing."""
    settings = {setting_of(r) for r in rows if r.ok and alpha_of(r) is not None}
    path = folder / VALIDITY
    if len(settings) != 1:
        path.unlink(missing_ok=True)
        return None
    sweep = next((r.tags["specexp.sweep_id"] for r in rows if r.tags.get("specexp.sweep_id")), folder.name)
    record = {
        **asdict(settings.pop()),
        "sweep_id": sweep,
        "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "depths": sorted({r.depth for r in found}),
    }
    atomic.write_text(path, json.dumps(record, indent=2))
    return path


def draw(found: Sequence[Required], real: Sequence[Placed], path: Path) -> Path | None:
    """The heat map (one panel per depth): speedup over batch (log2) x α, the α* line where it equals 1
    with its 95% band, the measured points as dots, each real drafter as a labelled star and its prompt
    categories as markers of their own."""
    depths = sorted({r.depth for r in found})
    if not depths:
        return None
    fig = Figure(figsize=(8.0, 4.2 * len(depths)), layout="constrained")
    for n, depth in enumerate(depths):
        ax = fig.add_subplot(len(depths), 1, n + 1)
        mine = [r for r in found if r.depth == depth]
        batches = [r.batch for r in mine]
        alphas = sorted({a for r in mine for a in r.points})
        grid = np.array(
            [[np.interp(a, list(r.points), [e.value for e in r.points.values()]) for r in mine] for a in alphas]
        )
        norm = TwoSlopeNorm(vcenter=1.0, vmin=min(float(grid.min()), 0.95), vmax=max(float(grid.max()), 1.05))
        if len(batches) > 1:
            mesh = ax.pcolormesh(batches, alphas, grid, cmap="RdBu", norm=norm, shading="gouraud")
            ax.contour(batches, alphas, grid, levels=[1.0], colors="black", linewidths=1, linestyles="dotted")
        else:
            mesh = ax.scatter([batches[0]] * len(alphas), alphas, c=grid[:, 0], cmap="RdBu", norm=norm, s=200)
        fig.colorbar(mesh, ax=ax, label="speedup (output tok/s, drafter / none)", pad=0.01)
        for r in mine:
            ax.scatter([r.batch] * len(r.points), list(r.points), s=12, color="black", zorder=3)
        shown = [(r.batch, r.alpha_star, r.lo, r.hi) for r in mine if math.isfinite(r.alpha_star)]
        if shown:
            b, star, lo, hi = (list(v) for v in zip(*shown, strict=True))
            top, bottom = alphas[-1], alphas[0]
            ax.fill_between(b, np.clip(lo, bottom, top), np.clip(hi, bottom, top), color="black", alpha=0.12)
            ax.plot(b, star, color="black", linewidth=2, marker="D", label="α* (speedup 1), 95% band")
        _place(ax, [p for p in real if p.depth == depth])
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches, labels=[str(b) for b in batches])
        ax.set_xlim(batches[0] / 1.15, batches[-1] * 1.15)
        ax.minorticks_off()
        ax.set_xlabel("batch (closed-loop streams)")
        ax.set_ylabel("acceptance length α (tokens per step)")
        ax.set_title(f"depth {depth}: speedup over batch and acceptance length (stars: real drafters)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", fontsize=8, framealpha=0.8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


CATEGORY_MARKERS = "o^sDvP<>X"


def _place(ax: Axes, real: Sequence[Placed]) -> None:
    """Each real drafter as a labelled star at its α; each prompt category as a marker of its own (in
    the legend), beside its drafter's star."""
    categories = sorted({p.category for p in real if p.category})
    labelled: set[str] = set()
    for p in real:
        if p.category is None:
            ax.scatter([p.batch], [p.alpha], marker="*", s=160, color="gold", edgecolor="black", zorder=4)
            ax.annotate(p.drafter, (p.batch, p.alpha), xytext=(5, 5), textcoords="offset points", fontsize=8)
            continue
        n = categories.index(p.category)
        ax.scatter(
            [p.batch * 1.04],  # beside the star, not under it
            [p.alpha],
            marker=CATEGORY_MARKERS[n % len(CATEGORY_MARKERS)],
            s=50,
            color=f"C{n % 10}",
            edgecolor="black",
            zorder=4,
            label=None if p.category in labelled else f"prompt category {p.category}",
        )
        labelled.add(p.category)


def write(rows: Sequence[PointResult], folder: Path, plots: bool = True) -> tuple[list[Path], list[str]]:
    """required_acceptance.csv, the heat map and the table's lines in ``folder``; nothing when the
    rows hold no synthetic map."""
    found = required(rows)
    if not found:
        return [], []
    real = placed(rows)
    folder.mkdir(parents=True, exist_ok=True)
    files = [write_csv(found, folder / CSV), *filter(None, [write_validity(rows, found, folder)])]
    figure = draw(found, real, folder / FIGURE) if plots else None
    return [*files, *([figure] if figure else [])], table(found, real)


def add_to(
    summary: tuple[dict[str, float], list[Path], list[str]], rows: Sequence[PointResult], sweep_dir: Path
) -> tuple[dict[str, float], list[Path], list[str]]:
    """A sweep's summary (parent metrics, files, answer lines) with its required-acceptance map."""
    metrics, files, answer = summary
    more_files, lines = write(rows, sweep_dir)
    return metrics, [*files, *more_files], [*answer, *lines]
