"""Per-request records: what the client saw of each request, the input to every metric."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Chunk:
    """One streamed event that carried output: when it arrived and how many tokens it held."""

    t: float  # seconds on the client's monotonic clock
    tokens: int
    text: str = ""
    reasoning: bool = False  # the text is a reasoning model's thinking (chat's reasoning_content), not its answer


@dataclass
class RequestRecord:
    index: int
    send: float  # monotonic seconds when the request was sent
    # Open loop: monotonic seconds when its schedule released it (send is later when load.max_concurrency
    # held it back); None in a closed loop, where a request arrives as it is sent.
    arrival: float | None = None

    end: float | None = None  # monotonic seconds of the last chunk (or of the failure)
    chunks: list[Chunk] = field(default_factory=list)
    prompt_tokens: int | None = None  # from the server's usage, else the client's count when it has one
    completion_tokens: int | None = None  # from the server's usage
    token_source: str = "chunks"  # "usage" when completion_tokens came from the server
    error: str | None = None
    finish_reason: str | None = None  # the stream's last choice's (a whole stream has one: specexp.load.client)
    model: str | None = None  # the model the stream's chunks named, when not the one the request asked for
    token_ids: list[int] | None = None  # when the server streams them
    # Engine-specific per-request fields (e.g. SGLang's spec_verify_ct), read by the engine adapter.
    extra: dict[str, Any] = field(default_factory=dict)
    warmup: bool = False  # a warm-up request, or one of a window discarded as warm-up
    # Sent only to keep a closed loop's ``batch`` in flight until the window's last measured request
    # ended (specexp.load.client): counted in the window's throughput and concurrency, not its latencies.
    filler: bool = False
    category: str | None = None  # the dataset's task category of the conversation
    conversation: int = 0  # which conversation of the phase this request belongs to
    turn: int = 0  # which of its user turns (0: the first; later turns carry the earlier answers)
    window: int | None = None  # the measured window it belongs to (specexp.point)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def arrived(self) -> float:
        """When the request arrived: its scheduled arrival in an open loop, else its send."""
        return self.send if self.arrival is None else self.arrival

    @property
    def output_tokens(self) -> int:
        if self.completion_tokens is not None:
            return self.completion_tokens
        return sum(c.tokens for c in self.chunks)

    @property
    def text(self) -> str:
        """The answer (thinking left out): what a later turn carries in its history."""
        return "".join(c.text for c in self.chunks if not c.reasoning)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RequestRecord:
        chunks = [Chunk(**c) for c in data.pop("chunks", [])]
        return cls(chunks=chunks, **data)
