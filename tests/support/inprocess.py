"""``python -m specexp`` without the process: the app's entry point called in the test's process.

A refusal (bad input: exit 2 before anything starts) costs a subprocess its interpreter start and
every import, several seconds each time on a busy host; here it costs the compose and the checks.
Hydra keeps global state (GlobalHydra, HydraConfig, the logging it configures) and the app sets
os.environ and logging.raiseExceptions: all of it is put back afterwards, so the next test, and
the next call, starts as a new process would.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig


@dataclass
class Outcome:
    """What a call of the entry point ended with, named as subprocess.CompletedProcess names it."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        """Every non-empty line it printed, stdout's then stderr's."""
        return [line for line in (self.stdout + self.stderr).splitlines() if line.strip()]


def main(args: list[str], cwd: Path, env: dict[str, str]) -> Outcome:
    """Call ``specexp.app.main`` as ``python -m specexp *args`` would, in ``cwd`` with ``env`` added
    to the environment; an exception other than SystemExit propagates (the test errors, as the
    process would print a traceback)."""
    from specexp import app

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with state_restored(), redirect_stdout(out), redirect_stderr(err):
        os.chdir(cwd)
        os.environ.update(env)
        sys.argv = ["specexp", *args]
        try:
            app.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return Outcome(code, out.getvalue(), err.getvalue())


@contextmanager
def state_restored() -> Iterator[None]:
    """The process-wide state a run of the app changes, as it was before the block."""
    cwd, environ, argv = os.getcwd(), dict(os.environ), sys.argv
    raise_exceptions = logging.raiseExceptions
    loggers = logging_state()
    hydra_was_up = GlobalHydra.instance().is_initialized()
    hydra_cfg = HydraConfig.instance().cfg
    try:
        yield
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        sys.argv = argv
        logging.raiseExceptions = raise_exceptions
        restore_logging(loggers)
        if not hydra_was_up:
            GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = hydra_cfg


LoggerState = tuple[int, list[logging.Handler], bool, bool]


def logging_state() -> dict[str, LoggerState]:
    """Level, handlers, propagate and disabled of the root logger and every logger made so far."""
    found = {"": logging.getLogger()}
    found.update((n, lg) for n, lg in logging.Logger.manager.loggerDict.items() if isinstance(lg, logging.Logger))
    return {name: (lg.level, list(lg.handlers), lg.propagate, lg.disabled) for name, lg in found.items()}


def restore_logging(before: dict[str, LoggerState]) -> None:
    """Loggers as ``before`` had them; a logger made since goes back to a new one's defaults and a
    handler added since (Hydra's console and job-log file) is closed."""
    kept = {id(h) for _, handlers, _, _ in before.values() for h in handlers}
    for name, (_, now, _, _) in logging_state().items():
        logger = logging.getLogger(name or None)
        for handler in now:
            if id(handler) not in kept:
                handler.close()
        level, handlers, propagate, disabled = before.get(name, (logging.NOTSET, [], True, False))
        logger.setLevel(level)
        logger.handlers[:] = handlers
        logger.propagate, logger.disabled = propagate, disabled
