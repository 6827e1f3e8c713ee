"""The context length a launched server will allow (prompt plus output tokens), known before it starts:
the engine's own flag in the launch argv (argparse keeps a flag's last copy, so engine.extra_args can
override the one specexp writes), else what the engine derives from the model's config.json.

vLLM (vllm/config/model.py) and SGLang (srt/configs/model_config.py) scale max_position_embeddings by a
rope_scaling factor for most rope types; the length derived here does so too, an upper bound on what
either allows, so it never refuses a prompt the server would take. The reference engine allows exactly
max_position_embeddings (specexp/reference/__main__.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from specexp.config import Config
from specexp.load.lengths import Context

# The flag that sets the context length, as each engine spells it (vLLM also reads underscores).
FLAGS = {
    "torch": ("--max-model-len",),
    "vllm": ("--max-model-len", "--max_model_len"),
    "sglang": ("--context-length", "--context_length"),
}
# The setting that raises it, per engine (its argv's flag comes from it unless extra_args repeats it).
SETTINGS = {"torch": "model.max_model_len", "vllm": "engine.max_model_len", "sglang": "model.max_model_len"}
# rope types whose max_position_embeddings already is the scaled length (no factor applied).
_UNSCALED_ROPE = ("llama3", "longrope", "su")


def context_length(cfg: Config, argv: list[str] | None) -> Context | str:
    """The context length of the server ``argv`` launches for ``cfg``, or why it is not known before
    the server runs (an endpoint specexp does not launch, a hub model without a local config.json)."""
    engine = cfg.engine.name
    if argv is None or engine not in FLAGS:
        return f"engine={engine}: specexp does not launch its server, so its context length is not known"
    setting = SETTINGS[engine]
    found = flag_value(argv, FLAGS[engine])
    if found is not None:
        flag, value = found
        length = human_int(value)
        if flag_value(list(cfg.engine.extra_args), FLAGS[engine]) is not None:
            setting = "engine.extra_args"  # its copy comes last, so it wins over the setting's
        if length is not None and length > 0:  # vLLM's -1: as long as memory allows, the model's own
            return Context(length, f"{flag} {value}", setting)
    config = Path(cfg.model.path).expanduser() / "config.json"
    if not config.is_file():
        return f"model.path {cfg.model.path} has no local config.json to read the context length from"
    length = model_context(json.loads(config.read_text(encoding="utf-8")), scaled=engine != "torch")
    if length is None:
        return f"{config} names no max_position_embeddings"
    return Context(length, f"max_position_embeddings in {config}", setting)


def flag_value(argv: list[str], flags: tuple[str, ...]) -> tuple[str, str] | None:
    """The last (flag, value) of any of ``flags`` in ``argv`` (``--flag value`` or ``--flag=value``)."""
    found = None
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in flags:
            if eq:
                found = (name, value)
            elif i + 1 < len(argv):
                found = (name, argv[i + 1])
    return found


def human_int(text: str) -> int | None:
    """An integer as vLLM's parser reads one: ``4096``, ``4k`` (x1000) or ``4K`` (x1024), m/M alike."""
    scale = {"k": 1000, "m": 1000**2, "K": 1024, "M": 1024**2}.get(text[-1:], 1)
    try:
        return int(float(text[:-1] if scale != 1 else text) * scale)
    except ValueError:
        return None


def model_context(config: dict, scaled: bool) -> int | None:
    """max_position_embeddings of a config.json (its text_config for a multimodal model), times its
    rope_scaling factor when ``scaled`` and the rope type does not already count it."""
    text = config if "max_position_embeddings" in config else config.get("text_config") or {}
    length = text.get("max_position_embeddings")
    if not isinstance(length, int):
        return None
    rope = text.get("rope_scaling") or {}
    kind = rope.get("rope_type", rope.get("type"))
    factor = rope.get("factor")
    if scaled and isinstance(factor, (int, float)) and factor > 1 and kind not in _UNSCALED_ROPE:
        return int(length * factor)
    return length
