"""One item of a workload: a conversation of user turns, sent one request per turn.

Each later turn goes with the history MT-Bench sends (FastChat's llm_judge/gen_api_answer.py): every
earlier user turn followed by the model's own answer to it, verbatim, then the new user turn. A
dataset's recorded answers are never replayed: the model under test writes its own history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Prompt = str | list[int]  # text, or token ids (random workloads, /v1/completions only)


@dataclass(frozen=True)
class Conversation:
    turns: tuple[Prompt, ...]  # user turns, in order; one request each
    system: str | None = None  # an opening system message (chat only)
    category: str | None = None  # the dataset's task category, for per-category results
    max_tokens: int | None = None  # this item's own output length (a trace's), else the workload's
    extra: tuple[tuple[str, int], ...] = ()  # kept in each of its records' extra (a trace's line and lengths)

    def messages(self, turn: int, answers: Sequence[str]) -> list[dict[str, str]]:
        """OpenAI messages for request ``turn``, given the model's answers to the turns before it."""
        if len(answers) != turn:
            raise ValueError(f"turn {turn} needs the {turn} answers before it, got {len(answers)}")
        out = [{"role": "system", "content": self.system}] if self.system is not None else []
        for user, answer in zip(self.turns[:turn], answers, strict=True):
            out += [{"role": "user", "content": str(user)}, {"role": "assistant", "content": answer}]
        return [*out, {"role": "user", "content": str(self.turns[turn])}]
