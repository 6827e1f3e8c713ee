"""Token lengths of prompts, and the rule that a request fits the server's context: its prompt plus the
output it asks for. Checked before any server starts, so a prompt too long is one line naming where it
is, not a server stalled on it.

Counting a prompt of megabytes costs seconds, and a dataset of thousands costs more, so a TokenCounter
first bounds a prompt from its characters: a BPE tokenizer that covers every byte (byte-level, or
falling back to bytes) and drops nothing makes tokens of at most its longest vocabulary entry's
characters and at least one byte each. Only when the bounds do not settle it is the prompt tokenized.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
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

    def bounds(self, text: str) -> tuple[int, int | None]:
        """(least, most) tokens of ``text`` from its characters alone; (0, None) where none is proven.
        Each token covers at most ``chars_per_token`` characters of the normalized text, and at least one
        byte of it as the pre-tokenizer writes it (a space may become "▁", 3 bytes; one may be put first)."""
        if self.chars_per_token is None:
            return 0, None
        normalizer = self.tokenizer.normalizer
        normalized = normalizer.normalize_str(text) if normalizer is not None else text
        return -(-len(normalized) // self.chars_per_token), 3 * len(normalized.encode("utf-8")) + 3

    def tokens(self, texts: Sequence[str], budget: int) -> tuple[int, bool]:
        """Tokens of ``texts`` together as ``(tokens, exact)``, as far as telling whether they fit in
        ``budget`` needs: the characters' lower bound when it alone is over, their upper bound when it is
        within (neither exact), else the count."""
        bounds = [self.bounds(t) for t in texts]
        least = sum(lo for lo, _ in bounds)
        if least > budget:
            return least, False
        most = [hi for _, hi in bounds if hi is not None]
        if len(most) == len(bounds) and sum(most) <= budget:
            return sum(most), False
        return sum(map(self.count, texts)), True


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
