"""The model's chat template, applied the way Hugging Face tokenizers and vLLM apply it.

The template comes from the checkpoint (``chat_template.jinja``, else ``tokenizer_config.json``'s
``chat_template``) and renders in a sandboxed Jinja environment with HF's settings (trim_blocks,
lstrip_blocks, ``raise_exception``); the text is then tokenized without adding special tokens, since
the template writes them itself. So ``/v1/chat/completions`` here and on vLLM send the target the
same token ids for the same messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from jinja2 import Template, TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatError(ValueError):
    """Messages the template cannot take (the server answers 400 with this message)."""


def _raise(message: str) -> None:
    raise ChatError(message)


def _token(value: Any) -> str:
    """A special token as tokenizer_config.json spells it: a string or an AddedToken dict."""
    if isinstance(value, dict):
        return str(value.get("content", ""))
    return "" if value is None else str(value)


def _content(message: dict[str, Any], index: int) -> str:
    """Text content: a string, or OpenAI content parts whose text parts are joined by newlines (vLLM's
    "string" content format)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "\n".join(str(p.get("text", "")) for p in content)
    raise ChatError(f"messages[{index}].content must be a string or a list of text parts")


@dataclass(frozen=True)
class ChatTemplate:
    source: str
    bos_token: str
    eos_token: str

    @classmethod
    def from_dir(cls, path: Path) -> ChatTemplate | None:
        """The checkpoint's template, or None when it has none."""
        config_path = path / "tokenizer_config.json"
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        jinja_path = path / "chat_template.jinja"
        source = jinja_path.read_text() if jinja_path.is_file() else config.get("chat_template")
        if isinstance(source, list):  # named templates: HF uses "default"
            source = next((t.get("template") for t in source if t.get("name") == "default"), None)
        if not source:
            return None
        return cls(source, _token(config.get("bos_token")), _token(config.get("eos_token")))

    @cached_property
    def template(self) -> Template:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.globals["raise_exception"] = _raise
        return env.from_string(self.source)

    def render(self, messages: Any, add_generation_prompt: bool = True) -> str:
        if not isinstance(messages, list) or not messages:
            raise ChatError("'messages' must be a non-empty list")
        normalized = []
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise ChatError(f"messages[{i}] must be an object with a string 'role'")
            normalized.append({"role": message["role"], "content": _content(message, i)})
        try:
            return self.template.render(
                messages=normalized,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        except TemplateError as exc:
            raise ChatError(f"the chat template failed: {exc}") from exc
