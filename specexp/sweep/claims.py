"""Several specexp processes on one Optuna study (shared RDB or journal storage): a trial claims its
configuration before it is launched, so no configuration is measured by two workers at once, and the
workers together stop at the study's ``n_trials``.

A claim is user attributes on the running trial: the configuration, and a lease that the worker
renews while the trial runs (a worker that died stops renewing, and its claim lapses). Each worker
writes its claim first and reads the others' after: of two workers claiming at the same moment at
least one sees the other and stands back, so two never go ahead together (both may stand back; each
then waits a random moment and asks again).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import threading
import time
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

CONFIG = "specexp.config"  # the configuration the trial measures (its parameters, as JSON)
LEASE = "specexp.lease_until"  # epoch seconds; renewed every LEASE_S / 4 while the trial runs
CLAIMED_AT = "specexp.claimed_at"
WORKER = "specexp.worker"  # host:pid of the process that measures it
LEASE_S = 120.0
MEASURED = (TrialState.COMPLETE, TrialState.FAIL)


def config_key(values: dict[str, Any]) -> str:
    return json.dumps(values, sort_keys=True, default=str)


def live(trial: FrozenTrial, now: float) -> bool:
    """A running trial whose claim holds: some worker is measuring it now."""
    return trial.state == TrialState.RUNNING and trial.user_attrs.get(LEASE, 0.0) > now


def taken(trials: list[FrozenTrial], now: float) -> int:
    """Trials measured or being measured: what counts toward n_trials across workers."""
    return sum(t.state in MEASURED or live(t, now) for t in trials)


class Claim:
    """A trial's claim on its configuration; ``with claim:`` renews it while the trial is measured and
    lets it lapse when the measurement ends without a result (an interrupt)."""

    def __init__(self, trial: optuna.Trial, values: dict[str, Any]) -> None:
        self.trial = trial
        self.key = config_key(values)
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def conflict(self, study: optuna.Study, n_trials: int) -> str | None:
        """Write the claim, then look at everyone's: why this trial must stand back, or None."""
        now = time.time()
        self.trial.set_user_attr(CONFIG, self.key)
        self.trial.set_user_attr(WORKER, f"{socket.gethostname()}:{os.getpid()}")
        self.trial.set_user_attr(CLAIMED_AT, now)
        self.trial.set_user_attr(LEASE, now + LEASE_S)
        now = time.time()
        others = [t for t in study.get_trials(deepcopy=False) if t.number != self.trial.number]
        same = [t.number for t in others if live(t, now) and t.user_attrs.get(CONFIG) == self.key]
        if same:
            return f"trial {same[0]} measures the same configuration now"
        if taken(others, now) >= n_trials:
            return f"the study has its {n_trials} trials (other workers)"
        return None

    def __enter__(self) -> Claim:
        self._renewer = threading.Thread(target=self._renew, daemon=True, name=f"claim-{self.trial.number}")
        self._renewer.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(LEASE_S / 4):
            self.trial.set_user_attr(LEASE, time.time() + LEASE_S)

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if kind is not None:  # no result will be told: free the configuration for the others now
            with contextlib.suppress(Exception):
                self.trial.set_user_attr(LEASE, 0.0)


def back_off() -> None:
    """A random moment before asking again, so that two workers that stood back together part."""
    time.sleep(random.uniform(0.2, 2.0))
