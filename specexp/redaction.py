"""Secret values, and keeping them out of everything specexp writes.

A secret is a *value*: that of an environment entry with a secret-like name (``HF_TOKEN``,
``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``: a name segment such as TOKEN or KEY) in engine.env,
nccl.env or specexp's own environment, and that of the variable ``engine.api_key_env`` names.
Parameters are never hidden for their name: ``drafter.num_draft_tokens``, ``workload.token_range``
and ``model.tokenizer`` are settings, not secrets. The values this process knows are replaced by
``***`` wherever they could land: config.yaml, server.json, results, logs (files and console),
MLflow params, tags and artifacts, and so every report read from them.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MASK = "***"
# Name segments (split on anything but letters and digits) that mark a variable as holding a secret.
SECRET_WORDS = frozenset(
    {"TOKEN", "KEY", "APIKEY", "SECRET", "PASSWORD", "PASSWD", "PASS", "CREDENTIAL", "CREDENTIALS", "AUTH", "PAT"}
)
# Values shorter than this are masked where their name says so (env entries, params), never searched
# for in free text: masking every "1" in a log would hide ordinary numbers.
MIN_SCRUB_LENGTH = 6

_known: set[str] = set()  # every secret value this process has seen; never written anywhere


def is_secret_name(name: str) -> bool:
    """``HF_TOKEN``, ``OPENAI_API_KEY``: yes; ``TOKENIZERS_PARALLELISM``, ``api_key_env``: no."""
    if name.lower().endswith("_env"):  # holds a variable's name (engine.api_key_env), not its value
        return False
    return any(part in SECRET_WORDS for part in re.split(r"[^A-Za-z0-9]+", name.upper()))


def remember(env: Mapping[str, Any] | None = None, names: tuple[str | None, ...] = ()) -> None:
    """Learn the secret values in ``env`` (by name) and in the variables ``names`` name."""
    for key, value in (env or {}).items():
        if is_secret_name(str(key)) and value:
            _known.add(str(value))
    for name in names:
        if name and os.environ.get(name):
            _known.add(os.environ[name])


def remember_config(cfg: Any) -> None:
    """The secrets of a composed config (engine.env, nccl.env, engine.api_key_env) and of this process."""
    remember(os.environ)
    remember(cfg.engine.env)
    remember(cfg.nccl.env)
    remember(names=(getattr(cfg.engine, "api_key_env", None),))
    guard_logging()


def scrub(text: str) -> str:
    """``text`` with every known secret value replaced by ``***``."""
    for value in sorted(_known, key=len, reverse=True):
        if len(value) >= MIN_SCRUB_LENGTH and value in text:
            text = text.replace(value, MASK)
    return text


def scrub_data(data: Any) -> Any:
    """A copy of JSON-like ``data`` with secrets masked: entries with secret-like names below an
    ``env`` key by name, every known value anywhere."""
    if isinstance(data, Mapping):
        return {k: _masked(k, v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [scrub_data(v) for v in data]
    if isinstance(data, str):
        return scrub(data)
    return data


def _masked(key: Any, value: Any) -> Any:
    if isinstance(value, Mapping) and str(key).split(".")[-1] == "env":
        return {k: MASK if is_secret_name(str(k)) and v else scrub_data(v) for k, v in value.items()}
    parts = str(key).split(".")
    if len(parts) >= 2 and parts[-2] == "env" and is_secret_name(parts[-1]) and value:  # flat params
        return MASK
    return scrub_data(value)


def override_key(override: str) -> str:
    """The dotted key a command-line override sets: ``engine.env.HF_TOKEN`` for ``+engine.env.HF_TOKEN=x``."""
    return override.partition("=")[0].lstrip("+~")


def mask_override(override: str) -> str:
    """A command-line override as it may be written down: a secret-named env entry's value masked
    (``+engine.env.HF_TOKEN=***``), known secrets elsewhere scrubbed."""
    key, eq, value = override.partition("=")
    if eq and value and _masked(override_key(override), value) == MASK:
        return f"{key}={MASK}"
    return scrub(override)


def scrub_file(path: Path) -> None:
    """Mask known secrets in a file written by someone else (an engine's log)."""
    if not _known or not path.is_file():
        return
    text = path.read_text(errors="surrogateescape")
    clean = scrub(text)
    if clean != text:
        path.write_text(clean, errors="surrogateescape")


_make_record = logging.getLogRecordFactory()


def _scrubbed_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
    record = _make_record(*args, **kwargs)
    if _known:
        message = record.getMessage()
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
    return record


def guard_logging() -> None:
    """Scrub every log record as it is made, whichever logger and handler it goes to (Hydra logs
    each job's overrides, secrets typed on the command line included, and replaces the handlers
    whenever it configures logging, so a handler filter would not last)."""
    if logging.getLogRecordFactory() is not _scrubbed_record:
        logging.setLogRecordFactory(_scrubbed_record)
