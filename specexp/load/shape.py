"""What each request of a workload looks like: the endpoint's path and the JSON body of every turn.

``completions`` posts the bare prompt to /v1/completions; ``chat`` posts OpenAI messages to
/v1/chat/completions, so the engine applies the model's own chat template. Both stream, ask for the
usage chunk, and carry the engine's extra fields (token ids, per-request acceptance).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specexp.config import WorkloadConfig
from specexp.load.conversation import Conversation

PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


@dataclass(frozen=True)
class RequestShape:
    path: str
    api: str
    base: dict[str, Any]  # fields every request of the point carries

    def body(self, conversation: Conversation, turn: int, answers: Sequence[str]) -> dict[str, Any]:
        """Request ``turn`` of ``conversation``, after the model's ``answers`` to the turns before it."""
        own = {} if conversation.max_tokens is None else {"max_tokens": conversation.max_tokens}
        if self.api == "chat":
            return {**self.base, **own, "messages": conversation.messages(turn, answers)}
        return {**self.base, **own, "prompt": conversation.turns[turn]}


def request_shape(workload: WorkloadConfig, model: str, engine_fields: dict[str, Any]) -> RequestShape:
    """The path and the shared body for ``workload`` sent to ``model``; the engine's fields win."""
    base = {
        "model": model,
        "max_tokens": workload.output_len,
        "temperature": workload.temperature,
        "ignore_eos": workload.ignore_eos,
        "stream": True,
        "stream_options": {"include_usage": True},
        **engine_fields,
    }
    return RequestShape(PATHS[workload.api], workload.api, base)
