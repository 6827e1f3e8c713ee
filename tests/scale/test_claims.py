"""Claims on a shared Optuna study (specexp.sweep.claims): worker processes on one journal file,
started at the same moment, never both go ahead with one configuration, and together stop at
exactly n_trials."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from specexp.sweep import claims

WORKERS = 3


def _study(path: Path) -> optuna.Study:
    storage = JournalStorage(JournalFileBackend(str(path)))
    return optuna.create_study(storage=storage, study_name="claims", load_if_exists=True)


def _same_configuration(path: Path, rounds: int, start: mp.synchronize.Barrier, claimed: mp.synchronize.Barrier):
    study = _study(path)
    for r in range(rounds):
        trial = study.ask()
        claim = claims.Claim(trial, {"round": r})
        start.wait()  # every worker claims the same configuration at once
        won = claim.conflict(study, n_trials=10_000) is None
        trial.set_user_attr("won", won)
        claimed.wait()  # a winner still holds its claim while the others look
        study.tell(trial, 1.0) if won else study.tell(trial, state=TrialState.PRUNED)
        claimed.wait()


def _quota(path: Path, n_trials: int, start: mp.synchronize.Barrier) -> None:
    study = _study(path)
    start.wait()
    while claims.taken(study.get_trials(deepcopy=False), time.time()) < n_trials:
        trial = study.ask()
        claim = claims.Claim(trial, {"number": trial.number})
        if claim.conflict(study, n_trials) is None:
            with claim:
                time.sleep(0.3)  # measuring
            study.tell(trial, 1.0)
        else:
            study.tell(trial, state=TrialState.PRUNED)


def _run(target, *args) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=target, args=args) for _ in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
        assert p.exitcode == 0


def test_one_configuration_claimed_at_once_goes_ahead_once_at_most(tmp_path) -> None:
    path, rounds = tmp_path / "journal.log", 12
    _study(path)
    ctx = mp.get_context("spawn")
    _run(_same_configuration, path, rounds, ctx.Barrier(WORKERS), ctx.Barrier(WORKERS))
    trials = _study(path).get_trials()
    assert len(trials) == WORKERS * rounds
    for r in range(rounds):
        winners = [t for t in trials if t.user_attrs[claims.CONFIG] == claims.config_key({"round": r})]
        assert sum(t.user_attrs["won"] for t in winners) <= 1, r
    assert sum(t.state == TrialState.COMPLETE for t in trials) >= 1  # not every round stood back


def test_workers_together_stop_at_exactly_n_trials(tmp_path) -> None:
    path = tmp_path / "journal.log"
    _study(path)
    _run(_quota, path, 7, mp.get_context("spawn").Barrier(WORKERS))
    trials = _study(path).get_trials()
    assert sum(t.state == TrialState.COMPLETE for t in trials) == 7
    assert len({t.user_attrs[claims.WORKER] for t in trials if t.state == TrialState.COMPLETE}) > 1
