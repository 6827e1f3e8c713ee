"""``python -m specexp --help``: the config groups, their options and the presets, each with its
one-line description, read from conf/ and sweeps/ so the help never disagrees with them.

Hydra prints ``hydra.help.template`` (conf/hydra/help/specexp.yaml); the two resolvers here fill in
the parts that come from files. An option's description is the first sentence of its YAML's first
comment line (after ``# @package``); the schemas (ConfigStore's ``schema/`` tree) are dataclasses,
not choices, and are not listed.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from specexp.configstore import CONF_DIR, SWEEPS_DIR
from specexp.sweep import validate


def description(path: Path) -> str:
    """The first sentence of the file's first comment line, or "" when it has none."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            return ""
        text = line.lstrip("#").strip()
        if text.startswith("@package"):
            continue
        head, dot, _ = text.partition(". ")
        return head + ("." if dot else "")
    return ""


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
    for name, resolver in validate.RESOLVERS.items():  # +sweep=validate_schedule's axes
        OmegaConf.register_new_resolver(name, resolver, replace=True)
