"""Which arm is best in each phase of a changing load, and what each arm loses over the whole run
against an oracle that picks the best arm of every phase (its regret).

The arms replayed the same arrivals, so the comparison is paired request by request: request i of
replay w arrived at the same time, in the same phase, for every arm. Each request has a value (1 if it
met slo.*, else 0; without targets, its TPOT, lower better), a phase's score is the sum over its
requests, and

    regret(arm) = sum over phases of |best arm's score - arm's score| / sum of the best scores,

the share of the per-phase oracle's goodput the arm gives up, or the share of TPOT it adds (0: best
everywhere). Its 95% interval is
a paired percentile bootstrap (scipy.stats.bootstrap, ``paired=True``) over the requests: one resample
draws the same requests for every arm, and the oracle is picked again in each resample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

RESAMPLES = 999
METHOD = (
    "paired percentile bootstrap over the requests (scipy.stats.bootstrap, 999 resamples), "
    "the per-phase best re-picked in every resample"
)


@dataclass(frozen=True)
class Paired:
    """The requests every arm sent: each one's phase, and each arm's value for it (in ``arms`` order)."""

    arms: list[str]
    phase: np.ndarray  # (n,) phase index of each request
    values: np.ndarray  # (arms, n)
    phases: int
    higher: bool = True  # a higher score is better (goodput); False: lower (TPOT)


def pair(values: Mapping[str, Mapping[tuple, tuple[int, float | None]]], phases: int, higher: bool = True) -> Paired:
    """Line up the arms' requests by key (replay, index): ``values[arm][key] = (phase, value)``; only
    the requests every arm has a value for count."""
    arms = list(values)
    having = [{k for k, (_, v) in vs.items() if v is not None} for vs in values.values()]
    keys = sorted(set.intersection(*having)) if arms else []
    phase = np.array([values[arms[0]][k][0] for k in keys], dtype=int)
    table = np.array([[values[a][k][1] for k in keys] for a in arms], dtype=float).reshape(len(arms), len(keys))
    return Paired(arms, phase, table, phases, higher)


def _scores(values: np.ndarray, phase: np.ndarray, phases: int) -> np.ndarray:
    """Scores (..., arms, phases) from values (..., arms, n) and phase indices (..., n)."""
    onehot = phase[..., None, :, None] == np.arange(phases)  # (..., 1, n, phases)
    return (values[..., :, :, None] * onehot).sum(axis=-2)


def _losses(scores: np.ndarray, arm: int, higher: bool) -> np.ndarray:
    """(..., phases + 1): the arm's share lost in each phase, then over the run (its regret)."""
    best = scores.max(axis=-2) if higher else scores.min(axis=-2)
    gap = np.abs(best - scores[..., arm, :])
    with np.errstate(invalid="ignore", divide="ignore"):
        per_phase = np.where(best > 0, gap / best, 0.0)
        total = gap.sum(axis=-1) / best.sum(axis=-1)
    return np.concatenate([per_phase, np.nan_to_num(total)[..., None]], axis=-1)


@dataclass(frozen=True)
class Regret:
    arm: str
    loss: list[float]  # per phase, then the run's (the last): share of the best given up
    low: list[float]
    high: list[float]


def regrets(paired: Paired, seed: int = 0) -> list[Regret]:
    """Each arm's loss per phase and over the run, with 95% intervals (module doc); nan intervals where
    there are too few requests to resample."""
    n = paired.phase.size
    scores = _scores(paired.values, paired.phase, paired.phases)
    out = []
    for a, arm in enumerate(paired.arms):
        point = _losses(scores, a, paired.higher)
        low = high = np.full(point.shape, math.nan)
        if n >= 2 and len(paired.arms) > 1:

            def statistic(phase: np.ndarray, *values: np.ndarray, axis: int = -1, arm: int = a) -> np.ndarray:
                stacked = np.stack([np.moveaxis(v, axis, -1) for v in values], axis=-2)
                lost = _losses(_scores(stacked, np.moveaxis(phase, axis, -1), paired.phases), arm, paired.higher)
                return np.moveaxis(lost, -1, 0)

            res = stats.bootstrap(
                (paired.phase, *paired.values),
                statistic,
                paired=True,
                vectorized=True,
                n_resamples=RESAMPLES,
                method="percentile",
                random_state=np.random.default_rng(seed),
            )
            low, high = res.confidence_interval.low, res.confidence_interval.high
        out.append(Regret(arm, point.tolist(), np.asarray(low).tolist(), np.asarray(high).tolist()))
    return out


def best_arms(paired: Paired) -> list[str]:
    """The best arm of each phase (the best score; the first listed on a tie)."""
    scores = _scores(paired.values, paired.phase, paired.phases)
    return [paired.arms[i] for i in (scores.argmax(axis=0) if paired.higher else scores.argmin(axis=0))]


def words(regret: Sequence[Regret], best: Sequence[str], what: str) -> list[str]:
    """The verdict's lines: the best arm per phase, and each arm's regret with its interval."""
    lines = [f"best arm by {what}, phase by phase: " + "; ".join(f"{k + 1}: {b}" for k, b in enumerate(best))]
    for r in regret:
        worst = int(np.argmax(r.loss[:-1]))
        lines.append(
            f"{r.arm}: regret {_pct(r.loss[-1], r.low[-1], r.high[-1])} against the per-phase best over the run"
            + (f"; loses most in phase {worst + 1}: {_pct(r.loss[worst], r.low[worst], r.high[worst])}")
        )
    return lines


def _pct(value: float, low: float, high: float) -> str:
    interval = "" if math.isnan(low) else f" [{100 * low:.1f}%, {100 * high:.1f}%]"
    return f"{100 * value:.1f}%{interval}"
