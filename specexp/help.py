"""``python -m specexp --help``: the config groups, their options and the presets, each with its
one-line description, read from conf/ and sweeps/ so the help never disagrees with them.

Hydra prints ``hydra.help.template`` (conf/hydra/help/specexp.yaml); the two resolvers here fill in
the parts that come from files. An option's description is the first sentence of its YAML's first
comment line (after ``# @package``); the schemas (ConfigStore's ``schema/`` tree) are dataclasses,
not choices, and are not listed.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import re
import textwrap
from collections.abc import Callable, Collection
from pathlib import Path

from hydra._internal.hydra import Hydra
from omegaconf import MISSING, DictConfig, OmegaConf

from specexp.configstore import CONF_DIR, SWEEPS_DIR
from specexp.sweep import validate

# "(specexp.depth_schedule)" in a comment: where the code is, for its readers; --help leaves it out.
MODULE_NOTE = re.compile(r"\s*\(specexp\.[\w.<>]+\)")


def description(path: Path) -> str:
    """The first sentence of the file's leading comment (after ``# @package``), whole even where it
    runs over several lines; "" when the file starts with no comment."""
    text: list[str] = []
    for line in path.read_text().splitlines():
        body = line.lstrip("#").strip()
        if not line.startswith("#") or (text and (not body or line.startswith("#  "))):
            break  # the comment ends, or an indented example or a blank comment line starts
        if not body.startswith("@package"):
            text.append(body)
    return first_sentence(MODULE_NOTE.sub("", " ".join(text)))


def preset_description(group: str, name: str) -> str:
    """What a group's option is, from its file's description ("" for an option no file defines)."""
    path = CONF_DIR / group / f"{name}.yaml"
    return description(path) if path.is_file() else ""


def _rows(entries: list[tuple[str, ...]]) -> str:
    """Aligned columns, indented by two spaces."""
    widths = [max(len(e[i]) for e in entries) for i in range(len(entries[0]) - 1)]
    return "\n".join(
        "  " + "  ".join(f"{cell:<{w}}" for cell, w in zip(e, widths, strict=False)) + "  " + e[-1] for e in entries
    )


def groups(choices: DictConfig | None = None) -> str:
    """Each group of conf/ in the order config.yaml lists them, with its options; the one in use
    (``choices``: Hydra's runtime choices) is marked with *."""
    chosen = {str(k): str(v) for k, v in (choices or {}).items()}
    listed = [next(iter(d)) for d in OmegaConf.load(CONF_DIR / "config.yaml").defaults if isinstance(d, DictConfig)]
    names = [g for g in listed if (CONF_DIR / g).is_dir()]
    names += sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir() and p.name not in [*names, "hydra"])
    entries = []
    for group in names:
        for i, path in enumerate(sorted((CONF_DIR / group).glob("*.yaml"))):
            mark = "*" if chosen.get(group) == path.stem else " "
            entries.append((group if i == 0 else "", f"{mark}{path.stem}", description(path)))
    return _rows(entries)


def presets() -> str:
    """The multirun and tuning presets of sweeps/, as ``+sweep=NAME``."""
    return _rows([(f"+sweep={p.stem}", description(p)) for p in sorted(SWEEPS_DIR.glob("*.yaml"))])


def register_resolvers() -> None:
    OmegaConf.register_new_resolver("specexp.groups", groups, replace=True)
    OmegaConf.register_new_resolver("specexp.presets", presets, replace=True)
    OmegaConf.register_new_resolver("specexp.fields", fields, replace=True)
    for name, resolver in validate.RESOLVERS.items():  # +sweep=validate_schedule's axes
        OmegaConf.register_new_resolver(name, resolver, replace=True)


class OnDemand:
    """A help template's value built only if the template shows it: string.Template, which Hydra's
    help goes through, calls str() on each value it substitutes."""

    def __init__(self, build: Callable[[], str]) -> None:
        self.build = build

    def __str__(self) -> str:
        return self.build()


def group_lists_on_demand() -> None:
    """Hydra builds its $APP_CONFIG_GROUPS and $HYDRA_CONFIG_GROUPS lists for any help template, a
    copy of the config repository per group: 2 of the 3 seconds ``--help`` took. specexp's template
    lists the groups itself; the lists are built now only for a template that shows them
    (``--hydra-help``, ``hydra/help=default``). Once per process (specexp.app's import)."""
    build = Hydra.format_config_groups
    Hydra.format_config_groups = lambda self, *args, **kwargs: OnDemand(lambda: build(self, *args, **kwargs))


def field_comments(cls: type) -> dict[str, str]:
    """Each field of dataclass ``cls`` (and of its bases) with its comment in the source: the one
    on its line, else the comment lines just above it, joined."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        above: list[str] = []
        for line in class_sources(inspect.getfile(klass))[klass.__qualname__][1:]:
            text = line.strip()
            if text.startswith("#"):
                above.append(text.lstrip("#").strip())
                continue
            name, colon, rest = text.partition(":")
            if colon and name.isidentifier() and line.startswith("    ") and not line.startswith("     "):
                trailing = rest.partition("  #")[2].strip()
                out[name] = trailing or " ".join(above) or out.get(name, "")
            above = []
    return out


@functools.cache
def class_sources(path: str) -> dict[str, list[str]]:
    """The lines of each top-level class of a source file, its decorators first, as
    inspect.getsourcelines gives them (which parses the whole module again for each class: most of
    ``--help``'s time)."""
    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    return {
        node.name: lines[(node.decorator_list or [node])[0].lineno - 1 : node.end_lineno]
        for node in ast.parse(text).body
        if isinstance(node, ast.ClassDef)
    }


SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)\.\s")


def first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence ("e.g." does not): never a cut mid-sentence."""
    end = SENTENCE_END.search(text)
    return text[: end.start() + 1] if end else text


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "..."
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if value == MISSING:
        return "(preset)"  # the group's option sets it
    return str(value).replace("'", "").replace(", ", ",")  # one word: [100,1000]


CONSTANT = re.compile(r"\b[A-Z][A-Z0-9_]{2,}\b")


def spelled_out(text: str, cls: type) -> str:
    """A schema comment as a ``--help`` reader needs it, in the words they type: a constant (``one of
    WORKLOAD_KINDS``) as its values, ``None`` as ``null``, no pointer into the code (a source reader
    follows those). Other capitals (NCCL_P2P_DISABLE) stay."""

    def values(found: re.Match[str]) -> str:
        value = getattr(inspect.getmodule(cls), found.group(), None)
        if isinstance(value, tuple | list | frozenset) and value and all(isinstance(v, str) for v in value):
            return ", ".join(value)
        return found.group()

    return MODULE_NOTE.sub("", CONSTANT.sub(values, text)).replace("None:", "null:")


def schema_fields(prefix: str, cls: type, skip: Collection[str] = ()) -> list[tuple[str, str]]:
    """``prefix.field=default`` and its description for each field of ``cls`` a user sets, except
    ``skip`` and nested schemas (listed on their own)."""
    comments = field_comments(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if f.name in skip or f.name.startswith("_") or dataclasses.is_dataclass(f.default_factory):
            continue
        text = spelled_out(WORDS.get(f"{prefix}{f.name}") or first_sentence(comments.get(f.name, "")), cls)
        rows.append((f"{prefix}{f.name}={_default(f)}", text))
    return rows


# The few fields whose source carries no comment (the engines' schemas) or one too terse to read alone.
WORDS = {
    "drafter.prompt_lookup_min": "ngram: the shortest n-gram matched against the context",
    "drafter.prompt_lookup_max": "ngram: the longest n-gram matched against the context",
    "workload.split": "hf: the dataset's split to read",
    "engine.name": "the engine (the engine= group sets it)",
    "engine.host": "the address the server listens on",
    "engine.startup_timeout_s": "seconds the server has to become ready",
    "engine.extra_args": "more server flags, appended to its argv last",
    "engine.env": "environment entries for the server (+engine.env.NAME=VALUE)",
    "engine.device": "the torch device the reference engine runs on",
    "engine.dtype": "the weights' and activations' dtype",
    "engine.seed": "the reference engine's sampling seed",
    "engine.enforce_eager": "vLLM --enforce-eager: no CUDA graphs",
    "engine.cuda_graph_max_bs": "SGLang --cuda-graph-max-bs; None: sized to the largest batch",
    "engine.disable_overlap_schedule": "SGLang --disable-overlap-schedule",
}


def fields() -> str:
    """Every field a user sets, schema by schema, with its default and its one-line description
    (from the comments of specexp/config/ and the engines' schemas)."""
    from specexp import config
    from specexp.engines import ENGINES

    nested = {f.name for f in dataclasses.fields(config.Config) if f.name in GROUP_SCHEMAS}
    sections: list[tuple[str, list[tuple[str, str]]]] = [
        ("top level", schema_fields("", config.Config, {*nested, "engine"})),
    ]
    for name in GROUP_SCHEMAS:
        sections.append((name, schema_fields(f"{name}.", getattr(config, GROUP_SCHEMAS[name]))))
    base = {f.name for f in dataclasses.fields(config.EngineConfig)}
    sections.append(("engine (every engine)", schema_fields("engine.", config.EngineConfig)))
    for engine in ENGINES.values():
        sections.append(
            (f"engine={engine.name}", schema_fields("engine.", engine.config_class, base - {"startup_timeout_s"}))
        )
    sections.append(("hydra.sweeper (the tuning presets)", schema_fields("hydra.sweeper.", config.TuneConf)))
    text = "\n".join(f"  {title}:\n{_wrapped(rows)}" for title, rows in sections if rows)
    return text.replace("$", "$$")  # Hydra's help goes through string.Template: a lone $ is a placeholder


GROUP_SCHEMAS = {
    "model": "ModelConfig",
    "drafter": "DrafterConfig",
    "workload": "WorkloadConfig",
    "load": "LoadConfig",
    "slo": "SloConfig",
    "measure": "MeasureConfig",
    "tracking": "TrackingConfig",
    "nccl": "NcclConfig",
}
KEY_WIDTH = 38


def _wrapped(rows: list[tuple[str, str]], width: int = 118) -> str:
    """Rows of ``key=default  description``, each description whole, wrapped under its column."""
    out = []
    indent = " " * (4 + KEY_WIDTH + 2)
    for key, text in rows:
        lead = f"    {key:<{KEY_WIDTH}}  "
        if len(key) > KEY_WIDTH:
            out.append(f"    {key}")
            lead = indent
        lines = textwrap.wrap(text, width - len(indent)) or [""]
        out.append(lead + lines[0])
        out += [indent + line for line in lines[1:]]
    return "\n".join(line.rstrip() for line in out)
