"""What is checked before any server starts, beyond the schemas and the dataset (which
specexp.load.prompts.check_workload reads): the checkpoints a config names, and a fixed port being
free. Each failure is one ConfigError naming the key, the file and the fix, where it used to be a
traceback after a server start, or someone else's server measured."""

from __future__ import annotations

from pathlib import Path

from specexp import server
from specexp.config import Config, ConfigError


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
    if port is not None and server.port_in_use(cfg.engine.host, port):
        problem, fix = server.port_in_use_message(cfg.engine.host, port)
        raise ConfigError("engine.port", problem, fix)


# What specexp (and Hydra for it) leaves in the folders it makes.
_SPECEXP_MARKS = {"run": (".hydra", "config.yaml", "results.json"), "sweep": ("sweep.json", "multirun.yaml")}


def check_output_folder(key: str, path: Path, kind: str) -> None:
    """A run or sweep folder given by hand: new, empty, or made by specexp before (a sweep's resumes
    into it); a folder holding anything else (``/``, a home, a project) is refused before a byte is
    written into it."""
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
