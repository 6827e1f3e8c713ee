"""Reading a production trace of arrivals: when each request came and how long its prompt and answer
were. Two layouts: Mooncake's JSONL (``timestamp`` in ms, ``input_length``, ``output_length``) and the
Azure LLM inference trace CSV (``TIMESTAMP`` a date-time, ``ContextTokens``, ``GeneratedTokens``).

It lives with the configuration because a trace is input the user names (``load.path``): a malformed
one must fail in one line naming the file and line when the config is read, before any server starts.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from specexp.config.errors import ConfigError

MOONCAKE = ("timestamp", "input_length", "output_length")
AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: seconds after the slice's first request (scaled), and its lengths."""

    at: float
    input_len: int
    output_len: int
    line: int  # where it is in the file (1-based), for the records


def _bad(path: Path, line: int, what: str, fix: str) -> ConfigError:
    return ConfigError("load.path", f"{path}:{line}: {what}", fix)


def _length(path: Path, line: int, name: str, value: object) -> int:
    try:
        number = float(str(value).strip())
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number == int(number) and number >= 0):
        raise _bad(path, line, f"{name} {value!r} is not a whole number of tokens", "fix or drop that line")
    return int(number)


def _seconds(path: Path, line: int, name: str, value: object, dated: bool) -> float:
    """A timestamp as seconds: Mooncake's milliseconds, or Azure's date-time (fractional seconds past 6
    digits cut)."""
    text = str(value).strip()
    try:
        if dated:
            head, dot, frac = text.partition(".")
            return datetime.fromisoformat(head + (dot + frac[:6] if dot else "")).timestamp()
        number = float(text) / 1e3
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise _bad(path, line, f"{name} {value!r} is not a time >= 0", "fix or drop that line")
    return number


def _rows(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    """(line, fields) of every request line, with the columns checked on the first."""
    with path.open(encoding="utf-8", newline="") as f:
        if path.suffix == ".csv":
            reader = csv.DictReader(f)
            if missing := [c for c in AZURE if c not in (reader.fieldnames or [])]:
                raise _bad(path, 1, f"the header lacks {', '.join(missing)}", f"an Azure trace has columns {AZURE}")
            for row in reader:
                yield reader.line_num, row
            return
        for line, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise _bad(path, line, f"not JSON ({exc.msg})", "one JSON object per line") from exc
            if not isinstance(row, dict) or (missing := [c for c in MOONCAKE if c not in row]):
                raise _bad(path, line, f"lacks {', '.join(missing)}", f"a Mooncake trace line has {MOONCAKE}")
            yield line, row


@lru_cache(maxsize=8)
def _read(path: Path, mtime: float) -> tuple[tuple[float, int, int, int], ...]:
    """(seconds, input, output, line) of every request, checked in order; cached per file version."""
    names = AZURE if path.suffix == ".csv" else MOONCAKE
    out: list[tuple[float, int, int, int]] = []
    for line, row in _rows(path):
        at = _seconds(path, line, names[0], row[names[0]], dated=names is AZURE)
        if out and at < out[-1][0]:
            raise _bad(path, line, f"{names[0]} goes back in time", "sort the trace by time")
        lengths = [_length(path, line, name, row[name]) for name in names[1:]]
        out.append((at, lengths[0], lengths[1], line))
    return tuple(out)


def read_trace(
    path: str, time_scale: float = 1.0, window_s: Sequence[float] | None = None, max_requests: int | None = None
) -> list[TraceRequest]:
    """The slice of the trace at ``path`` to replay: requests from ``window_s`` [start, end) seconds after
    its first request (all when None), at most ``max_requests``, their times from the slice's first
    request multiplied by ``time_scale``. A ConfigError naming the file and line for anything malformed,
    and the file for an empty slice."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError("load.path", f"{path} is not a file", "point load.path at a Mooncake .jsonl or Azure .csv")
    rows = _read(file, file.stat().st_mtime)
    origin = rows[0][0] if rows else 0.0
    lo, hi = window_s if window_s is not None else (0.0, math.inf)
    picked = [r for r in rows if lo <= r[0] - origin < hi][:max_requests]
    if not picked:
        where = f" in load.window_s [{lo:g}, {hi:g})" if window_s is not None else ""
        raise ConfigError("load.path", f"{path}: no request{where}", "widen load.window_s, or use another trace")
    start = picked[0][0]
    return [TraceRequest((at - start) * time_scale, n_in, n_out, line) for at, n_in, n_out, line in picked]
