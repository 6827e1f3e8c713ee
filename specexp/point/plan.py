"""What a point will run, decided before anything starts: its server (adapter, argv, the key that
decides reuse), its name, its checks (files, the engine's own parser) and its dry run. Nothing here
starts a process or writes a file, so sweeps plan whole groups with it (specexp.sweep.job_plan)."""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from omegaconf import DictConfig, OmegaConf

from specexp import checks, redaction, servers, tracking
from specexp.config import Config
from specexp.context import RUN_NODE, Launch, RunContext
from specexp.engines import adapter
from specexp.engines.base import Command, Engine
from specexp.engines.context_length import context_length
from specexp.load.prompts import check_lengths, check_workload
from specexp.load.send_plan import check_trace
from specexp.metrics import sequential
from specexp.result import PointResult

log = logging.getLogger("specexp")

PORT_PLACEHOLDER = 0  # the port in argv used for the server key and dry runs


class ServerPlan(NamedTuple):
    """What a config asks to serve: the adapter, the server command (port placeholder; None for an
    endpoint specexp does not launch) and the server key that decides reuse."""

    engine: Engine
    command: Command | None
    key: str


def describe(cfg: Config, run: RunContext) -> ServerPlan:
    """The server a config asks for, sized for ``run``, without side effects."""
    engine = adapter(cfg)
    command = engine.command(cfg, PORT_PLACEHOLDER, Launch.of(cfg, run) if cfg.engine.launches_server else None)
    return ServerPlan(engine, command, servers.server_key(command, engine.endpoint(cfg, PORT_PLACEHOLDER)))


_checked: set[str] = set()  # server keys whose argv the engine's own parser accepted in this process


def preflight(cfg: Config, run: RunContext) -> None:
    """Read the workload's dataset and check its prompts' lengths (check_prompts), and check the server's
    argv with the engine's own parser, once per server key per process; raises ConfigError before
    anything starts. Notes (settings the engine
    changes or ignores) are logged."""
    engine, command, key = describe(cfg, run)
    check_prompts(cfg, run, command)
    if key in _checked:  # an external endpoint (no command) is checked too: that it answers
        return
    checks.check_server_limits(cfg, engine, command, run)  # first: its refusal is then the only line
    for note in engine.preflight(cfg, command):
        log.warning(note)
    _checked.add(key)


SYNTHETIC = (
    "workload=%s sends random token ids: the acceptance measured on them does not represent real traffic "
    "(a drafter trained on language accepts far less of noise). Measure on a dataset: workload=humaneval, "
    "sharegpt, mtbench or hf, with workload.api=chat for a chat model."
)
_warned: set[str] = set()


def warn_synthetic(name: str) -> None:
    """Say once per process that speculation measured on random tokens is not what users get."""
    if name not in _warned:
        _warned.add(name)
        log.warning(SYNTHETIC, name)


def design_lines(configs: Iterable[Config]) -> list[str]:
    """What the measure settings can detect, said before anything runs: for each distinct setting
    among ``configs`` (a sweep's points usually share one) the settings, as overrides, and their power line."""
    lines: list[str] = []
    for windows, most, rel_ci in dict.fromkeys(
        (c.measure.windows, c.measure.max_windows, c.measure.rel_ci) for c in configs
    ):
        lines.append(f"design: measure.windows={windows} measure.max_windows={most} measure.rel_ci={rel_ci or 'null'}")
        if windows < 2:
            lines.append("power: one window per point gives no interval, so no difference is detected; use >= 2")
        else:
            lines.append(sequential.design_line(windows))
        if rel_ci:
            lines.append(
                f"stopping: at the looks {', '.join(map(str, sequential.looks(windows, most)))} windows, once the "
                f"interval is within ±{rel_ci:g}: arms taking turns with drafter=none on their speedups, together; "
                "any other point on its own output_throughput"
            )
    return lines


def dry_run_text(cfg: Config, run: RunContext) -> str:
    """A single run's dry run: what its design detects, then the server it would start, as JSON; ""
    for a sweep's point, whose sweep prints one plan for all its points and servers
    (specexp.sweep.job_plan.dry_run_plan)."""
    if run.sweep_id:
        return ""
    _, command, key = describe(cfg, run)
    shown = {"server_key": key, "argv": command.argv, "env": command.env} if command else {"key": key}
    return "\n".join([*design_lines([cfg]), json.dumps(redaction.scrub_data(shown), indent=2)])


def show(cfg: Config, run: RunContext, raw: DictConfig) -> PointResult:
    """A dry run: the server the point would start, printed; nothing is started or written."""
    if text := dry_run_text(cfg, run):
        print(text, flush=True)
    return PointResult.from_params("dry_run", flat_params(raw))


def flat_params(raw: DictConfig) -> dict[str, Any]:
    """The resolved config as dotted keys, secret values masked (ordinary settings never are), and
    what a sweeper decided for the job (its ``run`` node) by its own names (sweep_id, repeat, ...)."""
    flat: dict[str, Any] = {}
    container = OmegaConf.to_container(raw, resolve=True)
    decided = container.pop(RUN_NODE, None)  # type: ignore[union-attr]

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}{k}.")
        else:
            flat[prefix[:-1]] = node

    walk(container, "")
    return redaction.scrub_data(flat | RunContext.parse(decided).params())  # type: ignore[arg-type]


def ensure_models(cfg: Config) -> None:
    """The built models a config names (model=tiny, tiny_trained), built into outputs/ on first use."""
    if "tiny" in (cfg.model.build, cfg.drafter.build):
        from specexp.models.tiny import ensure_tiny

        ensure_tiny(Path(cfg.outputs))
    if "tiny_trained" in (cfg.model.build, cfg.drafter.build):
        from specexp.models.tiny_trained import ensure_tiny_trained

        ensure_tiny_trained(Path(cfg.outputs))


def prepare(cfg: Config) -> None:
    """Before a job is checked or run: its secrets known (so nothing writes them), its models built."""
    redaction.remember_config(cfg)
    if not cfg.dry_run:
        ensure_models(cfg)


def check_files(cfg: Config, run: RunContext) -> None:
    """The files a job names, readable before any server starts: its checkpoints (when specexp
    launches the server) and its dataset; ConfigError naming key, file and line."""
    command = describe(cfg, run).command
    if not cfg.dry_run and command is not None:
        checks.check_model_files(cfg)
        checks.check_reference_memory(cfg, run=run)
    check_prompts(cfg, run, command)


def check_prompts(cfg: Config, run: RunContext, command: Command | None) -> None:
    """The workload's dataset read, and each request the point sends fitting the server's context
    length. It sends, per phase (specexp.point.windows), a window's items and a closed loop's
    fillers; warm-up sends its own requests and whole warm-up windows."""
    w = cfg.workload
    check_workload(w, run.length_tokenizer)
    measured = max(w.measured(cfg.streams), cfg.batch if cfg.load.kind == "closed" else 0)
    warm = max(w.warmups(cfg.streams), w.measured(cfg.streams) if cfg.measure.warmup_windows else 0)
    argv = command.argv if command is not None else None
    tokenizer = cfg.model.tokenizer or cfg.model.path
    context = context_length(cfg, argv)
    check_lengths(w, context, tokenizer, (measured, warm), run.length_tokenizer)
    check_trace(cfg, context)


def load_label(cfg: Config) -> str:
    """Where the point sits on its load axis: ``batch 4`` or ``rate 2/s``."""
    return f"batch {cfg.batch}" if cfg.load.kind == "closed" else f"rate {cfg.load.rate:g}/s"


def run_name(cfg: Config, run: RunContext) -> str:
    """What the point's run is called: a sweep's name for it (the axes that vary), else its settings."""
    axis = load_label(cfg).replace(" ", "=")
    drafter = adapter(cfg).drafter_label(cfg)
    return run.run_name or f"{cfg.engine.name}/{cfg.model.name}: drafter={drafter} {axis}"


def server_label(cfg: Config) -> str:
    """The server a point uses, in words for the live display."""
    return f"{cfg.engine.name} serving {cfg.model.name}, drafter={cfg.drafter.name}"


def new_result(cfg: Config, run: RunContext, raw: DictConfig, plan: ServerPlan, job_dir: Path) -> PointResult:
    """The point's result before it runs: what it is (its settings, params and tags, a new point id)
    and ok until something says otherwise."""
    engine = plan.engine
    result = PointResult(
        status="ok",
        engine=cfg.engine.name,
        model=cfg.model.name,
        drafter=engine.drafter_label(cfg),
        batch=cfg.batch,
        load=cfg.load.kind,
        rate=cfg.load.rate,
        # load.rate as derived (a profile's peak, a trace's mean rate), not the raw config's null
        params=engine.recorded_params(cfg, flat_params(raw) | {"load.rate": cfg.load.rate}),
        job_dir=str(job_dir),
    )
    result.tags = {
        tracking.POINT_ID: uuid.uuid4().hex,
        "mlflow.runName": run_name(cfg, run),
        "specexp.sweep_id": run.sweep_id or "",
        "specexp.server_key": plan.key,
        "specexp.git_sha": tracking.git_sha(),
        "specexp.engine": cfg.engine.name,
        "specexp.drafter": engine.drafter_label(cfg),
        "specexp.workload_synthetic": str(cfg.workload.synthetic).lower(),
    }
    if "CUDA_VISIBLE_DEVICES" in os.environ:  # the GPUs its server was given (a group's slice of a node)
        result.tags["specexp.cuda_visible_devices"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return result
