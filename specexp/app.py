"""The Hydra task: compose → validate → run one point → return its results.

Under a multirun, specexp's sweeper (hydra/sweeper=specexp, the default) has already validated and
ordered every point and launches one job per server group: such a job runs its group's points in
order (specexp.sweep.runner) and returns their results.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException
from rich.markup import escape

from specexp import checks, help, servers, signals
from specexp.config import Config, ConfigError
from specexp.configstore import CONF_DIR, register, to_job
from specexp.console import console, invalid_config_exits, points_table, single_run_notes
from specexp.context import RUN_NODE, RunContext
from specexp.report.summary import summary_rows

register()
help.register_resolvers()
help.group_lists_on_demand()


def task(raw: DictConfig) -> dict[str, Any] | list[dict[str, Any]]:
    hc = HydraConfig.get()
    single = hc.mode == RunMode.RUN
    job_dir = Path(hc.runtime.output_dir)
    if single:
        with invalid_config_exits(), leaves_no_folder(job_dir):
            cfg, run = to_job(raw)
            check_single_run(cfg, run, job_dir)
    # The measuring code (MLflow, aiohttp, SciPy) is imported once there is something to measure:
    # --help and a refused value are answered without it, in about a second.
    from specexp import tracking
    from specexp.point import job, plan
    from specexp.sweep import runner

    if not single:
        if runner.is_group(job_dir):
            return [r.to_json() for r in runner.run_group(job_dir)]
        cfg, run = to_job(raw)  # another sweeper's job
    if cfg.dry_run:
        return plan.show(cfg, run, raw).to_json()
    try:
        result = job.run(cfg, run, raw, job_dir, hc.job.num if not single else 0)
    except KeyboardInterrupt:
        if not single:
            raise
        with signals.deferred(reraise=False):
            servers.stop()
        raise signals.Interrupted(
            f"interrupted: the point was not finished; what it received is in {job_dir}"
        ) from None
    if single:
        servers.stop()
        console.print(points_table(summary_rows([result]), f"results in {result.job_dir}"))
        link = tracking.run_link(cfg.tracking, result.run_id) if result.run_id else None
        for line in single_run_notes(result, help.preset_description("drafter", cfg.drafter.name), link):
            console.print(line, soft_wrap=True)
        if result.status != "ok":
            console.print(f"[red]point failed[/red]: {result.error}")
            raise SystemExit(1)
        if cfg.tracking.enabled and result.run_id is None:
            hint = tracking.SYNC_HINT.format(folder=job_dir)
            console.print(f"[red]not in MLflow[/red]: upload later with {hint}", soft_wrap=True)
            raise SystemExit(tracking.TRACKING_FAILED)
    return result.to_json()


@contextlib.contextmanager
def leaves_no_folder(job_dir: Path) -> Iterator[None]:
    """A run refused before it starts leaves no folder behind: Hydra's own files in it are removed
    (anything else, kept)."""
    try:
        yield
    except ConfigError:
        hydra_only = {".hydra", f"{HydraConfig.get().job.name}.log"}
        if job_dir.is_dir() and {p.name for p in job_dir.iterdir()} <= hydra_only:
            shutil.rmtree(job_dir, ignore_errors=True)
        raise


def check_single_run(cfg: Config, run: RunContext, job_dir: Path) -> None:
    """Everything a single run can get wrong before its server starts (ConfigError: exit 2)."""
    if cfg.resume is not None:
        raise ConfigError("resume", "only a sweep can be resumed", "add -m (and the sweep's overrides)")
    if cfg.repeats > 1:
        raise ConfigError("repeats", "repeats are server launches, interleaved across a sweep", "add -m")
    from specexp import tracking  # what remains to check needs the measuring code (see task)
    from specexp.point import plan, record

    if (job_dir / record.RESULTS).exists():
        raise ConfigError(
            "hydra.run.dir", f"{job_dir} already holds a run's results", "leave hydra.run.dir at its default"
        )
    plan.prepare(cfg)
    plan.check_files(cfg, run)  # a bad dataset file stops a dry run too
    if cfg.dry_run:
        return
    plan.preflight(cfg, run)
    if plan.describe(cfg, run).command is not None:
        checks.check_port(cfg)
    tracking.check(cfg.tracking, Path(cfg.outputs))


_hydra_main = hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(task)

MULTIRUN_FLAGS = ("-m", "--multirun")


def multirun_last(argv: list[str]) -> list[str]:
    """``-m``/``--multirun`` moved behind the overrides: Hydra's parser takes no override after it,
    and ``batch=1,4 -m dry_run=true`` is how people type it."""
    flags = [a for a in argv if a in MULTIRUN_FLAGS]
    return [a for a in argv if a not in MULTIRUN_FLAGS] + flags[:1]


INPUT_ERRORS = (ConfigCompositionException, OverrideParseException, MissingConfigException, OmegaConfBaseException)


# Hydra's refusal of a sweep's value in a single run (hydra/_internal/config_loader_impl.py, 1.3): a
# choice sweep (batch=1,4) is "ambiguous", a range or interval sweep "requires --multirun".
SWEEP_IN_A_RUN = re.compile(r"^(?:Ambiguous value for argument|Sweep parameters) '(?P<override>.*)'")


def input_message(exc: BaseException, argv: Sequence[str] = ()) -> str:
    """Hydra's or OmegaConf's complaint about the command line (``argv``) in one line: the key and
    what is wrong with it, a group's options listed, the setting meant by a misspelt key."""
    if isinstance(exc, MissingConfigException) and exc.options:
        group, _, name = (exc.missing_cfg_file or "").rpartition("/")
        return f"{group or 'config'}: no option {name!r}. Fix: use one of {', '.join(exc.options)}"
    if isinstance(exc, OverrideParseException):
        return f"cannot read the override {exc.override!r}: {' '.join(exc.message.split())}"
    if isinstance(exc, ConfigCompositionException) and (sweep := SWEEP_IN_A_RUN.match(str(exc))):
        command = shlex.join(["python", "-m", "specexp", *(argv or [sweep["override"]]), "-m"])
        return f"{sweep['override']} is a sweep: add -m ({command})"
    seen: BaseException | None = exc
    while seen is not None:
        key = getattr(seen, "full_key", None)
        if isinstance(seen, ConfigKeyError | ConfigAttributeError) and key:
            return unknown_key(seen, str(key))
        if key:
            first = (str(getattr(seen, "msg", "") or seen).strip().splitlines() or [""])[0]
            return f"{key}: {first}. Fix: give {key} a value of its type (see --cfg job)"
        seen = seen.__cause__ or seen.__context__
    return " ".join(str(exc).split()) or type(exc).__name__


NOT_SUGGESTED = {"hydra", RUN_NODE}  # Hydra's node, and the one specexp's sweepers hand each job


def unknown_key(exc: OmegaConfBaseException, full_key: str) -> str:
    """A key the composed config lacks, with the declared one meant: its nearest sibling (at any depth:
    ``slo.ttft`` → ``slo.ttft_ms``), else the one setting anywhere whose name is nearest (``ttft_ms`` →
    ``slo.ttft_ms``). A new entry of an open dict (``nccl.env.X``) takes a ``+``."""
    parent = exc.parent_node if isinstance(exc.parent_node, DictConfig) else None
    if parent is not None and OmegaConf.get_type(parent) is dict:
        return f"{full_key}: no such entry yet. Fix: add it with +{full_key}=..."
    name = str(exc.key) if exc.key is not None else full_key.rpartition(".")[2]
    prefix = full_key[: -len(name)] if full_key.endswith(name) else ""
    siblings = [str(k) for k in parent if f"{prefix}{k}" not in NOT_SUGGESTED] if parent is not None else []
    meant = [prefix + n for n in difflib.get_close_matches(name, siblings, n=1)]
    if not meant and parent is not None:
        everywhere = list(setting_keys(parent._get_root()))  # OmegaConf's own walk up to the config's root
        names = difflib.get_close_matches(name, {k.rpartition(".")[2] for k in everywhere}, n=1)
        meant = [k for k in everywhere if names and k.rpartition(".")[2] == names[0]]
    every = "python -m specexp --cfg job lists them"
    fix = f"did you mean {meant[0]}? ({every})" if len(meant) == 1 else f"check its name ({every})"
    return f"{full_key}: no such setting. Fix: {fix}"


def setting_keys(node: DictConfig, prefix: str = "") -> Iterator[str]:
    """Every key of a composed config a user sets, groups and their fields; no open dict's entries."""
    for key, value in node.items_ex(resolve=False):
        if f"{prefix}{key}" not in NOT_SUGGESTED:
            yield f"{prefix}{key}"
            if isinstance(value, DictConfig) and OmegaConf.get_type(value) is not dict:
                yield from setting_keys(value, f"{prefix}{key}.")


FOLDER_KEYS = {"hydra.run.dir": "run", "hydra.sweep.dir": "sweep"}


def check_folders(argv: list[str]) -> None:
    """Folders named on the command line, checked before Hydra writes its own files into them."""
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key in FOLDER_KEYS and value and "${" not in value:
            checks.check_output_folder(key, Path(value.strip("'\"")).expanduser(), FOLDER_KEYS[key])


def main() -> None:
    # A log line that cannot be written (Hydra's log file on a full disk) is lost, not a traceback:
    # what went wrong is said on the console, and the results say it too.
    logging.raiseExceptions = False
    sys.argv[1:] = multirun_last(sys.argv[1:])
    with invalid_config_exits():
        check_folders(sys.argv[1:])
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra's errors reach here, to be said in one line
    try:
        _hydra_main()
    except KeyboardInterrupt as exc:  # the record is complete: one line, no traceback
        signals.settled()
        console.print(str(exc) or "interrupted", soft_wrap=True, markup=False)
        raise SystemExit(signals.EXIT_CODE) from None
    except INPUT_ERRORS as exc:  # the command line: a bad value, option or syntax
        console.print(f"[red]invalid configuration[/red]: {escape(input_message(exc, sys.argv[1:]))}", soft_wrap=True)
        raise SystemExit(2) from None
