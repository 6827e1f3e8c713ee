"""What is checked before any server starts, beyond the schemas and the dataset (which
specexp.load.prompts.check_workload reads): the checkpoints a config names, a fixed port being free,
and a batch the server would not run at once (its KV cache, its limit on running requests). Each
failure is one ConfigError naming the key, the file and the fix, where it used to be a
traceback after a server start, or someone else's server measured."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from pathlib import Path
from typing import NamedTuple

from specexp import servers
from specexp.config import Config, ConfigError
from specexp.context import RunContext
from specexp.engines import limits
from specexp.engines.base import Command, Engine


def looks_local(path: str) -> bool:
    """A path on this machine rather than a hub id (``org/name``): absolute, ./, ../, ~, or present."""
    return path.startswith(("/", "./", "../", "~")) or Path(path).expanduser().exists()


def check_checkpoint(key: str, path: str | None) -> None:
    """A local checkpoint folder holds a config.json; hub ids are left to the engine."""
    if not path or not looks_local(path):
        return
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ConfigError(key, f"{folder} is not a folder", f"point {key} at a checkpoint folder or a hub id")
    if not (folder / "config.json").is_file():
        raise ConfigError(
            key, f"{folder / 'config.json'} does not exist", f"point {key} at a folder with the model's config.json"
        )


def check_model_files(cfg: Config) -> None:
    """The checkpoints a launched server loads."""
    check_checkpoint("model.path", cfg.model.path)
    if cfg.drafter.speculative:
        check_checkpoint("drafter.path", cfg.drafter.path)
    tokenizer = cfg.model.tokenizer
    if tokenizer and looks_local(tokenizer) and not Path(tokenizer).expanduser().exists():
        raise ConfigError("model.tokenizer", f"{tokenizer} does not exist", "point it at a tokenizer or a hub id")


def check_port(cfg: Config) -> None:
    """A fixed ``engine.port`` is free before specexp launches anything on it."""
    port = cfg.engine.port
    if port is not None and servers.port_in_use(cfg.engine.host, port):
        problem, fix = servers.port_in_use_message(cfg.engine.host, port)
        raise ConfigError("engine.port", problem, fix)


# What specexp (and Hydra for it) leaves in the folders it makes.
_SPECEXP_MARKS = {
    "run": (".hydra", "config.yaml", "results.json"),
    "sweep": ("sweep.json", "multirun.yaml", "sweep.lock"),
}


def check_folder_path(key: str, path: Path) -> None:
    """A folder specexp makes or writes into can be one: not a file, not under a file, no symlink
    loop, and (when it is still to be made) a folder can be made where it would go (not /proc)."""
    fix = f"give {key} a folder you can write to, or leave {key} at its default"
    try:
        os.stat(path)
    except FileNotFoundError:
        link = next((p for p in [path, *path.parents] if p.is_symlink() and not p.exists()), None)
        if link is not None:
            raise ConfigError(key, f"{link} is a link to {os.readlink(link)}, which does not exist", fix) from None
        exists = False
    except NotADirectoryError:
        file = next((p for p in reversed([path, *path.parents]) if p.exists() and not p.is_dir()), path)
        raise ConfigError(key, f"{file} is a file, so {path} cannot be a folder", fix) from None
    except OSError as exc:  # a symlink loop (ELOOP), a name too long, no permission to look
        raise ConfigError(key, f"{path} cannot be used as a folder: {exc.strerror}", fix) from None
    else:
        exists = True
    if exists:
        if not path.is_dir():
            raise ConfigError(key, f"{path} is a file, not a folder", fix)
        return
    made = next((p for p in path.parents if p.exists()), path.parent)  # the folder new ones would be made in
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".specexp-", dir=made))
    except OSError as exc:
        why = exc.strerror if exc.errno != errno.ENOENT else "it takes no new folders"
        raise ConfigError(key, f"{path} cannot be made: {made}: {why}", fix) from None


def check_output_folder(key: str, path: Path, kind: str) -> None:
    """A run or sweep folder given by hand: a place a folder can be (``check_folder_path``), and new,
    empty, or made by specexp before (a sweep's resumes into it); a folder holding anything else
    (``/``, a home, a project) is refused before a byte is written into it."""
    check_folder_path(key, path)
    if not path.is_dir():
        return
    entries = [p.name for p in path.iterdir()]
    if not entries or any(name in entries for name in _SPECEXP_MARKS[kind]):
        return
    shown = ", ".join(sorted(entries)[:5]) + (", ..." if len(entries) > 5 else "")
    raise ConfigError(
        key,
        f"{path} holds files specexp did not make ({shown}); nothing is written into it",
        f"give a new or empty folder, e.g. {key}={path / 'specexp'}, or leave {key} at its default",
    )


_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def kv_cache_bytes(model_dir: Path, slots: int, length: int, dtype: str) -> int | None:
    """The reference engine's KV cache at its peak for ``slots`` requests of ``length`` tokens: keys
    and values ``[layers, slots, kv_heads, capacity, head_dim]``, capacity the power of two from 64
    up that holds ``length``, the old and the doubled cache both held while it grows (1.5x); None
    when the model's config.json cannot tell."""
    try:
        raw = json.loads((model_dir / "config.json").read_text())
        heads = raw["num_attention_heads"]
        layers, kv_heads = raw["num_hidden_layers"], raw.get("num_key_value_heads") or heads
        head_dim = raw.get("head_dim") or raw["hidden_size"] // heads
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return None
    capacity = 64
    while capacity < length:
        capacity *= 2
    return 3 * layers * slots * kv_heads * capacity * head_dim * _DTYPE_BYTES.get(dtype, 4)  # 2 (k, v) x 1.5


class Free(NamedTuple):
    """Memory a device can still give the reference engine, and the words that say where."""

    bytes: int
    where: str


def available_memory() -> int | None:
    """Bytes this machine can still give (MemAvailable), None where /proc/meminfo does not say."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def free_memory(device: str) -> Free | None:
    """What the reference engine's ``device`` can still hold: host memory on CPU, the GPU's free
    memory (torch.cuda.mem_get_info) on ``cuda[:i]``; None where that cannot be read."""
    if device == "cpu":
        free = available_memory()
        return None if free is None else Free(free, "this machine has {} available")
    import torch  # only here: a CPU run never pays for CUDA's initialisation

    if not torch.cuda.is_available():
        return None
    try:
        free, _total = torch.cuda.mem_get_info(torch.device(device))
    except (RuntimeError, ValueError, AssertionError):
        return None
    return Free(free, f"GPU {device} has {{}} free")


def check_reference_memory(cfg: Config, free: Free | None = None, run: RunContext | None = None) -> None:
    """A batch the reference engine cannot hold is refused before launch, naming the limit: its KV
    caches (target and draft model) for the server's capacity (``run``'s; None: a single run's) in
    requests of a random workload's length, against ``free`` (None: what the engine's device, CPU or
    a CUDA GPU, has now). The server would otherwise fail every request."""
    engine = cfg.engine
    device = getattr(engine, "device", "cpu")
    if engine.name != "torch" or not device.startswith(("cpu", "cuda")) or cfg.workload.kind != "random":
        return
    capacity = (run or RunContext()).capacity(cfg)
    length = cfg.workload.input_len + cfg.workload.output_len + (cfg.drafter.num_draft_tokens or 0)
    models = [cfg.model.path] + ([cfg.drafter.path] if cfg.drafter.path else [])
    sizes = [kv_cache_bytes(Path(m).expanduser(), capacity, length, engine.dtype) for m in models]
    if None in sizes:
        return
    need = sum(sizes)  # type: ignore[arg-type]
    free = free if free is not None else free_memory(device)
    if free is None or need <= free.bytes:
        return
    raise ConfigError(
        "batch",
        f"the reference engine's KV cache for {capacity} requests of {length} tokens needs "
        f"{need / 2**30:.1f} GiB and " + free.where.format(f"{free.bytes / 2**30:.1f} GiB"),
        f"use a batch (and engine.max_running_requests) of at most {max(1, capacity * free.bytes // need)}, "
        "or shorter workload.input_len/output_len",
    )


def check_server_limits(cfg: Config, engine: Engine, command: Command | None, run: RunContext | None = None) -> None:
    """A launched vLLM or SGLang server that would run fewer requests at once than specexp sizes it
    for (``run``'s capacity: the batch, or the sweep's largest) is refused before launch, naming the
    limit. specexp passes the limit itself, so only engine.extra_args can lower it; its engine's own
    parser reads the whole argv (last copy, abbreviations, vLLM's --config), and only when there are
    extra args to read."""
    if command is None or not cfg.engine.extra_args:
        return
    run = run or RunContext()
    capacity = run.capacity(cfg)
    env = {**os.environ, **command.env}
    for limit, value in limits.server_limits(engine.name, engine.python(cfg), command.argv, env).items():
        if value < capacity:
            raise ConfigError(
                "engine.extra_args",
                f"{limit.flag} resolves to {value} in the server's argv, and this server is sized for "
                f"{capacity} requests at once ({run.capacity_source(cfg)}): a request beyond {value} {limit.beyond}",
                f"drop {limit.flag} from engine.extra_args (specexp sizes the server from the batch), or use a batch "
                f"of at most {value}",
            )
