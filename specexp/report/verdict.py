"""The sweep's answer in words: per speculative drafter, where speculation stops paying off."""

from __future__ import annotations

from collections.abc import Sequence

from specexp.result import PointResult


def verdicts(rows: Sequence[PointResult], speedups: dict[int, dict[str, float]], cross: dict[str, float]) -> list[str]:
    """The answer in words, per speculative drafter."""
    lines = []
    for name in dict.fromkeys(rows[i].drafter for i in speedups):
        pts = sorted(
            (rows[i].batch, s["speedup"]) for i, s in speedups.items() if rows[i].drafter == name and "speedup" in s
        )
        if not pts:
            continue
        keys = [
            k
            for k in cross
            if (k == f"crossover_batch.{name}" or k.startswith(f"crossover_batch.{name}."))
            and not k.endswith(("_lo", "_hi"))
        ]
        span = f"batch {pts[0][0]}-{pts[-1][0]}"
        if keys:
            where = ", ".join(
                f"≈ {cross[k]:.1f}"
                + (
                    f" (95% CI {cross[k + '_lo']:.1f}-{cross[k + '_hi']:.1f})"
                    if k + "_lo" in cross and k + "_hi" in cross
                    else ""
                )
                + (f" ({k.split('.', 2)[2]})" if k.count(".") > 1 else "")
                for k in keys
            )
            lines.append(f"with {name}, speculation stops paying off above batch {where}")
        elif all(s >= 1 for _, s in pts):
            lines.append(
                f"with {name}, speculation wins at every measured batch ({span}; "
                f"speedup {min(s for _, s in pts):.2f}x-{max(s for _, s in pts):.2f}x)"
            )
        else:
            lines.append(f"with {name}, speculation never pays off at any measured batch ({span})")
    return lines
