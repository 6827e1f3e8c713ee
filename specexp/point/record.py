"""A point's files on disk, each whole or not at all (specexp.atomic), secrets scrubbed: the config,
the server's argv and self-description, this point's slice of the server log, the records and
results.json. The disk comes before MLflow: what is here can always be uploaded later (specexp.sync)."""

from __future__ import annotations

import contextlib
import json
import logging
import traceback
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from specexp import atomic, redaction
from specexp.point.serve import Served, ServerLog
from specexp.records import RequestRecord
from specexp.result import PointResult

log = logging.getLogger("specexp")

RESULTS = "results.json"
TRACEBACK = "traceback.txt"  # an unexpected failure's traceback: the point's own, not the console's
ARTIFACTS = ("config.yaml", "server.json", "server_info.json", "server.log", "records.jsonl", RESULTS, TRACEBACK)


def save_config(raw: DictConfig, job_dir: Path) -> None:
    """The point's resolved config (config.yaml), secrets masked."""
    config = OmegaConf.to_container(raw, resolve=True)
    atomic.write_text(job_dir / "config.yaml", OmegaConf.to_yaml(redaction.scrub_data(config)))


def save_server(served: Served, job_dir: Path) -> None:
    """What the point's server is: its argv and env (server.json) and, for a new launch, the engine's
    own description of itself (server_info.json)."""
    if served.info is not None:
        write_json(job_dir / "server_info.json", served.info)
    if served.command:
        write_json(job_dir / "server.json", {"argv": served.command.argv, "env": served.command.env})


def save(result: PointResult, job_dir: Path, server_log: ServerLog, records: list[RequestRecord]) -> None:
    """The point's files, each whole or not at all; when one cannot be written (a full disk, an I/O
    error, a permission) the point fails naming it, and results.json says so if it still fits: no
    point is ok with its data missing."""
    try:
        _save_server_log(server_log, job_dir)
        _write_records(job_dir / "records.jsonl", records)
        write_json(job_dir / RESULTS, result.to_json())
    except OSError as exc:
        problem = atomic.reason(exc)
        log.error("%s: the point is recorded as failed", problem)
        result.status, result.error = (
            "failed",
            f"{problem}" + (f"; before that: {result.error}" if result.error else ""),
        )
        result.tags["specexp.status"] = result.status
        with contextlib.suppress(OSError):
            write_json(job_dir / RESULTS, result.to_json())


def save_traceback(exc: BaseException, job_dir: Path) -> str:
    """An unexpected failure's traceback written to the point's folder (secrets scrubbed), for whoever
    debugs it; the one line the console gets instead: the error, and where its traceback is."""
    said = f"point failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
    try:
        atomic.write_text(job_dir / TRACEBACK, redaction.scrub("".join(traceback.format_exception(exc))))
    except OSError as error:
        return f"{said} (its traceback was not written: {atomic.reason(error)})"
    return f"{said} (traceback in {job_dir / TRACEBACK})"


def write_json(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path``, whole or not at all, secrets scrubbed."""
    atomic.write_text(path, json.dumps(redaction.scrub_data(data), indent=2, default=str))


def _write_records(path: Path, records: list[RequestRecord]) -> None:
    with atomic.replacing(path) as tmp, tmp.open("w") as f:
        for r in records:
            f.write(json.dumps(r.to_json()) + "\n")


def _save_server_log(server_log: ServerLog, job_dir: Path) -> None:
    """This point's slice of the server log (from launch, or from where the last point left off)."""
    if not server_log.path.exists():
        return
    with server_log.path.open("rb") as f:
        f.seek(server_log.start)
        text = f.read().decode(errors="surrogateescape")
    atomic.write_text(job_dir / "server.log", redaction.scrub(text), errors="surrogateescape")
