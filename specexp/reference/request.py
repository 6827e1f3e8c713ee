"""One request's state inside the reference engine: what it asked for and what it has produced so far.

In a module of its own so that the engine (which schedules requests) and the drafters (which read
their tokens and track their draft caches) both import it without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

# Called from the engine thread with the tokens a step emitted and the finish reason (None: more to come).
Emit = Callable[[list[int], str | None], None]


@dataclass(eq=False)
class RequestState:
    prompt: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    ignore_eos: bool
    emit: Emit
    generator: torch.Generator | None = None  # None: greedy, no randomness drawn
    tokens: list[int] = field(default_factory=list)  # prompt + generated so far
    draft_len: int = 0  # tokens the draft model's cache holds
    pending: torch.Tensor | None = None  # EAGLE-3: fused target states of positions draft_len.. not yet drafted on
    drafted: int = 0  # draft tokens proposed for this request: its share of the draft_tokens counter
    drafts: int = 0  # its steps that carried drafts (verify steps): its share of the num_drafts counter
    arrival: float = 0.0  # monotonic seconds it was submitted, and admitted to the running batch
    admitted: float | None = None
    finish: str | None = None
    aborted: bool = False

    def __post_init__(self) -> None:
        self.tokens = list(self.prompt)

    @property
    def remaining(self) -> int:
        return self.max_tokens - (len(self.tokens) - len(self.prompt))
