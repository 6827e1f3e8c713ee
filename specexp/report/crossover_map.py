"""The envelope as a map: a drafter's speedup over (batch, context length) as a heatmap, with the
break-even line and its 95% band, from the points of a break-even search run at several prompt
lengths (``+sweep=crossover_map``) or of any sweep over batch x workload.input_len (random
prompts) or x workload.length_bucket (a dataset's prompts by token length).

Each row is one prompt length. Between measured batches the speedup is interpolated linearly in
log2(batch), the way the break-even itself is read (crossing.crossover); the measured batches are
marked and labelled with their speedups, so the eye can tell measurement from interpolation. The
band is each row's 95% break-even interval (crossing.crossover_interval, as the verdict reads it),
clipped to the measured range where it is open.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from specexp.metrics.stats import Estimate
from specexp.report.crossover_points import believed_map, break_even
from specexp.result import PointResult


def speedup_map(rows: Sequence[PointResult]) -> dict[str, dict[int, Estimate]]:
    """Prompt length -> batch -> the drafter's speedup, at the batches that may be believed."""
    return {n: b.settled for n, b in believed_map(rows).items()}


NEAR = 0.25  # log2(batch): labels closer than this to the last one would overlap (the table has them)
EDGE = 0.14  # log2(batch): how far a row's colour reaches past its outermost measured batches


def _row_values(grid: np.ndarray, points: dict[int, Estimate]) -> np.ndarray:
    """One length's speedup on the grid: interpolated in log2(batch) between its measured batches,
    NaN outside them (a length measured at batch 1 alone is not painted across the whole range)."""
    xs = np.log2(sorted(points))
    values = np.interp(grid, xs, [points[b].value for b in sorted(points)])
    return np.where((grid >= xs[0] - EDGE) & (grid <= xs[-1] + EDGE), values, np.nan)


def _labelled(batches: list[int]) -> list[int]:
    """The batches whose speedups are written beside their dots: each at least NEAR from the last."""
    out: list[int] = []
    for b in batches:
        if not out or math.log2(b) - math.log2(out[-1]) >= NEAR:
            out.append(b)
    return out


def draw_map(rows: Sequence[PointResult], path: Path) -> Path | None:
    """The heatmap as a PNG at ``path``; None when fewer than two lengths have speedups. A batch set
    aside (failed, unsettled, breaking the curve) is marked with a cross, without a value, and neither
    colours the map nor moves the break-even."""
    found = believed_map(rows)
    if len(found) < 2:
        return None
    lengths = list(found)
    batches = sorted({b for one in found.values() for b in one.settled})
    lo_x, hi_x = math.log2(batches[0]), math.log2(batches[-1])
    grid = np.linspace(lo_x, hi_x, 240)
    values = np.ma.masked_invalid([_row_values(grid, one.settled) for one in found.values()])
    fig = Figure(figsize=(8.0, 1.6 + 1.1 * len(lengths)), layout="constrained")
    ax = fig.add_subplot()
    ax.set_facecolor("0.85")  # outside a length's measured batches: not coloured as if measured
    spread = max(abs(values.max() - 1), abs(1 - values.min()), 0.05)
    norm = TwoSlopeNorm(vcenter=1.0, vmin=1 - spread, vmax=1 + spread)
    x_edges = 2 ** np.concatenate([[grid[0] - 0.14], (grid[1:] + grid[:-1]) / 2, [grid[-1] + 0.14]])
    y_edges = np.arange(len(lengths) + 1) - 0.5
    mesh = ax.pcolormesh(x_edges, y_edges, values, cmap="RdBu", norm=norm, shading="flat")
    fig.colorbar(mesh, ax=ax, label="speedup (output tok/s, drafter / none)", pad=0.01)
    centres, bands, lines = [], [], []
    crossed = False
    for row, one in enumerate(found.values()):
        points = dict(sorted(one.settled.items()))
        xs = list(points)
        ax.scatter(xs, [row] * len(xs), s=18, color="black", zorder=3)
        for k, b in enumerate(_labelled(xs)):  # in batch order, above and below by turns: no overlap
            up = 7 if k % 2 == 0 else -13
            ax.annotate(
                f"{points[b].value:.2f}", (b, row), xytext=(0, up), textcoords="offset points", ha="center", fontsize=7
            )
        if one.aside:
            label = None if crossed else "set aside (failed, unsettled or off the curve)"
            ax.scatter(
                list(one.aside), [row] * len(one.aside), s=40, marker="x", color="dimgray", zorder=3, label=label
            )
            crossed = True
        point, lo, hi = break_even(points)
        centres.append(row)
        bands.append((min(max(lo, batches[0]), batches[-1]), max(min(hi, batches[-1]), batches[0])))
        edge = {math.inf: batches[-1]}.get(lo, batches[0] if hi == -math.inf else math.nan)  # nan: not known
        lines.append(point if point is not None else edge)
    los, his = [b[0] for b in bands], [b[1] for b in bands]
    ax.fill_betweenx(centres, los, his, color="black", alpha=0.1, linewidth=0, label="95% band")
    for edge in (los, his):  # the band's edges drawn, so a wide band leaves the colours readable
        ax.plot(edge, centres, color="black", linewidth=1, linestyle="--")
    ax.plot(lines, centres, color="black", linewidth=2, marker="D", markersize=5, label="break-even (speedup 1)")
    ax.set_xscale("log", base=2)
    ticks = [2**k for k in range(math.ceil(lo_x), math.floor(hi_x) + 1)]
    ax.set_xticks(ticks, labels=[str(t) for t in ticks])
    ax.minorticks_off()
    shown = sorted({*batches, *(b for one in found.values() for b in one.aside)})
    ax.set_xlim(shown[0] / 1.1, shown[-1] * 1.1)
    ax.set_yticks(range(len(lengths)), labels=[n.replace("-", "–") for n in lengths])
    ax.set_ylim(-0.5, len(lengths) - 0.5)
    ax.set_xlabel("batch (closed-loop streams)")
    ax.set_ylabel("prompt tokens" + (" (dataset bucket)" if any("-" in n for n in lengths) else ""))
    drafter = next((r.drafter for r in rows if r.speculative), "drafter")
    ax.set_title(f"{drafter} vs none: speedup over batch and context length (dots: measured; grey: not)")
    ax.legend(loc="upper right", fontsize=8, framealpha=0.8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
