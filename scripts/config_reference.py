"""docs/reference/config.md, generated from the dataclass schemas Hydra's ConfigStore holds, so the
keys users read are the ones the config accepts: ``python scripts/config_reference.py`` rewrites it,
``--check`` fails when it is stale (CI runs the check as a unit test, as for docs/METRICS.md).

Each key's meaning is its schema's comment in the source (specexp.help reads the same comments for
``--help``, which shows their first sentence; this page shows them whole).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from specexp import config, help
from specexp.configstore import CONF_DIR
from specexp.engines import ENGINES
from specexp.metrics.docs import write_or_check

DOC_PATH = Path(__file__).resolve().parents[1] / "docs" / "reference" / "config.md"

INTRO = """\
<!-- Generated from the schemas in specexp/config/ and specexp/engines/ by
`python scripts/config_reference.py`: edit the schemas' comments, then rerun it. -->
# Configuration keys

Every key a command line or a YAML file may set, with its type, its schema's default and what it
means. A config group's option (`workload=humaneval`, `engine=vllm`) is a YAML file under `conf/`
that sets some of these keys; `python -m specexp --cfg job` prints what a command composes, and
`python -m specexp --help` lists the groups and their options.

- Set a key: `workload.output_len=128`; sweep it: `batch=1,4,8 -m`; a list: `'engine.extra_args=[--a,--b]'`;
  an entry of a mapping no schema declares: `+engine.env.HF_TOKEN=...`.
- A key no schema declares, or a value of the wrong type, is refused before anything starts (exit 2),
  naming the nearest key.
- *default* is the schema's; `(preset)`: the group's option always sets it. An option's YAML may set
  other values than these (`workload=humaneval` sets `workload.api=chat`): `--cfg job` shows them.
"""


# Keys whose schema carries no comment (the sweeper's, named as Hydra's sweepers name them).
WORDS = {
    "hydra.sweeper.mode": "grid: the points the overrides name, ordered by server; optuna: a study "
    "(`+sweep=tune_*`); crossover: the adaptive break-even search (`+sweep=crossover`)",
    "hydra.sweeper.params": "a study's search space: key -> `range(lo, hi)`, `choice(a, b)` or "
    "`interval(lo, hi)`, as hydra-optuna-sweeper writes it",
    "hydra.sweeper.crossover.batch_min": "the smallest batch the search measures (on both arms)",
    "hydra.sweeper.crossover.batch_max": "the largest batch the search measures (on both arms)",
}


# Annotations in the words a YAML writer uses.
TYPE_WORDS = {
    "Any": "any",
    "None": "null",
    "dict[str, Any]": "mapping",
    "dict[str, str]": "mapping of str",
    "list[str]": "list of str",
    "list[int]": "list of int",
    "list[float]": "list of float",
    "list[Any]": "list",
}


def type_name(annotation: object) -> str:
    """``int | None`` as ``int or null``, ``list[str]`` as ``list of str`` (the schemas' modules use
    postponed annotations, so each is the source's text)."""
    parts = str(getattr(annotation, "__name__", annotation)).split("|")
    return " or ".join(TYPE_WORDS.get(p.strip(), p.strip()) for p in parts)


def default_options() -> dict[str, str]:
    """Each group's option chosen when the command line names none (conf/config.yaml's defaults)."""
    chosen: dict[str, str] = {}
    for entry in OmegaConf.load(CONF_DIR / "config.yaml").defaults:
        if isinstance(entry, DictConfig):
            for group, option in entry.items():
                if option is not None and (CONF_DIR / str(group)).is_dir():
                    chosen[str(group)] = str(option)
    return chosen


def rows(prefix: str, cls: type, skip: set[str]) -> list[str]:
    """One table row per key of ``cls`` a user sets: key, type, default, meaning; a nested schema's
    keys (``hydra.sweeper.crossover.*``) follow under its name."""
    comments = help.field_comments(cls)
    out = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        if f.name in skip or f.name.startswith("_"):
            continue
        if dataclasses.is_dataclass(f.default_factory):
            out += rows(f"{key}.", f.default_factory, set())
            continue
        meaning = help.spelled_out(WORDS.get(key) or help.WORDS.get(key) or comments.get(f.name, ""), cls)
        default = help._default(f) if f.default != "" else '""'
        cells = (f"`{key}`", type_name(f.type), f"`{default}`", meaning.replace("|", "/"))
        out.append("| " + " | ".join(cells) + " |")
    return out


def groups() -> dict[str, type]:
    """The root config's groups, in its order: each field typed by a schema (engine's, typed Any,
    is each engine's own)."""
    hints = typing.get_type_hints(config.Config)
    return {f.name: hints[f.name] for f in dataclasses.fields(config.Config) if dataclasses.is_dataclass(hints[f.name])}


def section(title: str, lead: str, body: list[str]) -> str:
    table = ["| key | type | default | meaning |", "| --- | --- | --- | --- |", *body]
    return "\n".join([f"## {title}", "", *([lead, ""] if lead else []), *table, ""])


def group_lead(group: str, chosen: dict[str, str]) -> str:
    options = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml")) if (CONF_DIR / group).is_dir() else []
    if not options:
        return ""
    default = f" (default `{group}={chosen[group]}`)" if group in chosen else ""
    return f"Options of `{group}=`: " + ", ".join(f"`{o}`" for o in options) + default + "."


def render() -> str:
    chosen = default_options()
    schemas = groups()
    # Fields specexp's sweepers set for each job, where the root schema still carries them.
    internal = getattr(help, "INTERNAL", set())
    parts = [INTRO, section("Top level", "", rows("", config.Config, {*internal, *schemas, "engine"}))]
    for group, cls in schemas.items():
        parts.append(section(f"`{group}`", group_lead(group, chosen), rows(f"{group}.", cls, set())))
    every = rows("engine.", config.EngineConfig, set())
    parts.append(section("`engine`: every engine", group_lead("engine", chosen), every))
    base = {f.name for f in dataclasses.fields(config.EngineConfig)}
    for engine in ENGINES.values():
        body = rows("engine.", engine.config_class, base)
        if body:
            parts.append(section(f"`engine={engine.name}`", "", body))
    lead = "specexp's sweeper (`hydra/sweeper=specexp`, the default); `sweeps/`'s presets (`+sweep=NAME`) set these."
    title = "`hydra.sweeper`: grids, studies and the break-even search"
    parts.append(section(title, lead, rows("hydra.sweeper.", config.SweeperConf, set())))
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python scripts/config_reference.py", description=__doc__)
    p.add_argument("--check", action="store_true", help="exit 1 when docs/reference/config.md is stale")
    args = p.parse_args(argv)
    return write_or_check(DOC_PATH, render(), args.check, "python scripts/config_reference.py")


if __name__ == "__main__":
    sys.exit(main())
