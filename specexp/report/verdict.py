"""The sweep's answer in words: per speculative drafter, where speculation stops paying off; in a
rate sweep also, per drafter, up to which request rate the latency targets hold."""

from __future__ import annotations

from collections.abc import Sequence

from specexp.report.analysis import slo_target
from specexp.result import PointResult


def _keys(cross: dict[str, float], stem: str, name: str) -> list[str]:
    """The sweep-level keys of one drafter (one per series), without their bounds."""
    return [
        k
        for k in cross
        if (k == f"{stem}.{name}" or k.startswith(f"{stem}.{name}.")) and not k.endswith(("_lo", "_hi"))
    ]


def _where(cross: dict[str, float], keys: list[str]) -> str:
    """ "≈ 5.7 (95% CI 5.1-6.3)" per key, with the settings that tell a drafter's series apart."""
    return ", ".join(
        f"≈ {cross[k]:.1f}"
        + (
            f" (95% CI {cross[k + '_lo']:.1f}-{cross[k + '_hi']:.1f})"
            if k + "_lo" in cross and k + "_hi" in cross
            else ""
        )
        + (f" ({k.split('.', 2)[2]})" if k.count(".") > 1 else "")
        for k in keys
    )


def verdicts(rows: Sequence[PointResult], speedups: dict[int, dict[str, float]], cross: dict[str, float]) -> list[str]:
    """The answer in words, per speculative drafter (and per drafter for a rate sweep's SLO)."""
    lines = []
    closed = {i: s for i, s in speedups.items() if rows[i].load == "closed"}
    for name in dict.fromkeys(rows[i].drafter for i in closed):
        pts = sorted(
            (rows[i].batch, s["speedup"]) for i, s in closed.items() if rows[i].drafter == name and "speedup" in s
        )
        if not pts:
            continue
        keys = _keys(cross, "crossover_batch", name)
        span = f"batch {pts[0][0]}-{pts[-1][0]}"
        if keys:
            lines.append(f"with {name}, speculation stops paying off above batch {_where(cross, keys)}")
        elif all(s >= 1 for _, s in pts):
            lines.append(
                f"with {name}, speculation wins at every measured batch ({span}; "
                f"speedup {min(s for _, s in pts):.2f}x-{max(s for _, s in pts):.2f}x)"
            )
        else:
            lines.append(f"with {name}, speculation never pays off at any measured batch ({span})")
    return lines + slo_verdicts(rows, cross) + rate_verdicts(rows, speedups, cross)


def _slo_text(rows: Sequence[PointResult]) -> str:
    """ "TTFT ≤ 500 ms, TPOT ≤ 50 ms" when the rows share one SLO; "" when they differ."""
    texts = set()
    for row in rows:
        limits = [(name, row.params.get(f"slo.{key}")) for name, key in (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"))]
        texts.add(", ".join(f"{name} ≤ {float(v):g} ms" for name, v in limits if v not in (None, "None", "")))
    return f" ({texts.pop()})" if len(texts) == 1 else ""


def slo_verdicts(rows: Sequence[PointResult], cross: dict[str, float]) -> list[str]:
    """Per drafter of a rate sweep, the baseline included: up to which rate enough requests meet the SLO."""
    lines = []
    rated = [r for r in rows if r.ok and r.load == "rate" and "slo_attainment" in r.metrics]
    for name in dict.fromkeys(r.drafter for r in rated):
        mine = sorted((r for r in rated if r.drafter == name), key=lambda r: r.rate or 0.0)
        pts = [(r.rate, r.metrics["slo_attainment"]) for r in mine]
        target = min(slo_target(r) for r in mine)
        share = f"{target:.0%} of requests meet the SLO{_slo_text(mine)}"
        keys = _keys(cross, "slo_max_rate", name)
        if keys:
            lines.append(f"with {name}, {share} up to {_where(cross, keys)} req/s")
        elif all(a >= slo_target(r) for r, (_, a) in zip(mine, pts, strict=True)):
            lines.append(f"with {name}, {share} at every measured rate (up to {pts[-1][0]:g} req/s)")
        else:
            lines.append(f"with {name}, fewer than {share} already at {pts[0][0]:g} req/s (attainment {pts[0][1]:.0%})")
    return lines


def rate_verdicts(
    rows: Sequence[PointResult], speedups: dict[int, dict[str, float]], cross: dict[str, float]
) -> list[str]:
    """Per speculative drafter of a rate sweep: up to which rate its streams are faster than without."""
    lines = []
    rated = {i: s for i, s in speedups.items() if rows[i].load == "rate" and "decode_speedup" in s}
    for name in dict.fromkeys(rows[i].drafter for i in rated):
        pts = sorted((rows[i].rate or 0.0, s["decode_speedup"]) for i, s in rated.items() if rows[i].drafter == name)
        keys = _keys(cross, "crossover_rate", name)
        if keys:
            lines.append(
                f"with {name}, speculation stops paying off above {_where(cross, keys)} req/s "
                "(per-stream decode speed vs drafter=none)"
            )
        elif all(s >= 1 for _, s in pts):
            lines.append(
                f"with {name}, speculation wins at every measured rate ({pts[0][0]:g}-{pts[-1][0]:g} req/s; "
                f"stream speedup {min(s for _, s in pts):.2f}x-{max(s for _, s in pts):.2f}x)"
            )
        else:
            lines.append(
                f"with {name}, speculation never pays off at any measured rate ({pts[0][0]:g}-{pts[-1][0]:g} req/s)"
            )
    return lines
