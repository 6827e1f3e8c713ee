"""Token lengths of prompts, and the rule that a request fits the server's context: its prompt plus the
output it asks for. Checked before any server starts, so a prompt too long is one line naming where it
is, not a server stalled on it.

Counting a prompt of megabytes costs seconds, so a TokenCounter first bounds it from its characters: a
BPE tokenizer that covers every byte (byte-level, or falling back to bytes) and drops nothing makes
tokens of at most its longest vocabulary entry's characters each, so len(normalized text) / that length
tokens at least. Only when the bound alone does not settle it is the prompt tokenized.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specexp.config import ConfigError

# Pre-tokenizers that drop characters (whitespace, delimiters): their tokens cover less than the text.
_DROPPING = frozenset({"Whitespace", "WhitespaceSplit", "BertPreTokenizer", "CharDelimiterSplit", "Punctuation"})


@dataclass(frozen=True)
class Context:
    """A server's context length, where it comes from, and the setting that raises it."""

    length: int
    source: str
    setting: str


def overflow(prompt_tokens: int, output_len: int, context_len: int) -> int:
    """Tokens by which a request of ``prompt_tokens`` asking ``output_len`` more exceeds the context (0: fits)."""
    return max(prompt_tokens + output_len - context_len, 0)


def check_fits(key: str, where: str, prompt: tuple[int, bool], output_len: int, context: Context) -> None:
    """The rule: a ConfigError naming the prompt (``where``), its length, the output length and the
    context length when the request cannot fit. ``prompt``: (tokens, exact); not exact, a lower bound."""
    tokens, exact = prompt
    if overflow(tokens, output_len, context.length):
        least = "" if exact else "at least "
        raise ConfigError(
            key,
            f"{where}: the prompt is {least}{tokens} tokens, plus workload.output_len {output_len}: "
            f"over the context length {context.length} ({context.source})",
            f"shorten or drop that prompt, lower workload.output_len, or raise {context.setting}",
        )


def tokenizer_file(folder: str | None) -> Path | None:
    """The tokenizer.json of a tokenizer folder (or the file itself); None where there is none here."""
    where = Path(folder or "").expanduser()
    path = where / "tokenizer.json" if where.is_dir() else where
    return path if folder and path.is_file() else None


class TokenCounter:
    """Tokens of texts as one tokenizer.json counts them (no special tokens added)."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(path))
        spec = json.loads(path.read_text(encoding="utf-8"))
        covering = _covers_every_byte(spec)
        longest = max(map(len, self.tokenizer.get_vocab(with_added_tokens=True)), default=0)
        self.chars_per_token = longest if covering and longest > 0 else None

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def at_least(self, text: str) -> int:
        """A lower bound on ``count(text)`` from the characters alone (0 where none is proven)."""
        if self.chars_per_token is None:
            return 0
        normalizer = self.tokenizer.normalizer
        normalized = normalizer.normalize_str(text) if normalizer is not None else text
        return -(-len(normalized) // self.chars_per_token)

    def bounded(self, text: str, budget: int) -> tuple[int, bool]:
        """``(tokens, exact)``: the lower bound (not exact) when it alone exceeds ``budget``, else the count."""
        least = self.at_least(text)
        return (least, False) if least > budget else (self.count(text), True)


def _covers_every_byte(spec: dict[str, Any]) -> bool:
    """Whether every character of the normalized text ends up in some token: BPE over bytes (byte-level
    or byte fallback, so no unknown token swallows a run of text) and no pre-tokenizer that drops any."""
    model = spec.get("model") or {}
    if model.get("type") != "BPE":
        return False
    pre = spec.get("pre_tokenizer")
    parts = list(_nodes(pre))
    byte_level = any(p.get("type") == "ByteLevel" for p in parts)
    dropping = any(p.get("type") in _DROPPING or p.get("behavior") == "Removed" for p in parts)
    return (bool(model.get("byte_fallback")) or byte_level) and not dropping


def _nodes(node: Any) -> list[dict[str, Any]]:
    """Every object inside a tokenizer.json component (a Sequence's parts too)."""
    if isinstance(node, dict):
        return [node, *(n for v in node.values() for n in _nodes(v))]
    if isinstance(node, list):
        return [n for v in node for n in _nodes(v)]
    return []
