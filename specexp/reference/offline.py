"""Acceptance of a drafter on a list of prompts, counted by the reference engine in-process: the same
``BatchEngine`` a server runs (built by the server's own ``build``), without HTTP or a port. For the
benchmark and the tests that need acceptance counts, not timing; greedy, so the counts are exact."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from specexp.reference.__main__ import build, check, parser
from specexp.reference.prometheus import PREFIX
from specexp.reference.request import RequestState


@dataclass(frozen=True)
class Acceptance:
    """Counts as the engine's counters hold them (vLLM's definitions)."""

    drafts: int  # verify steps that carried draft tokens
    draft_tokens: int
    accepted: int
    accepted_per_pos: tuple[int, ...]
    outputs: tuple[tuple[int, ...], ...]  # each prompt's generated tokens, in prompt order

    @property
    def rate(self) -> float:
        return self.accepted / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def length(self) -> float:
        """Mean tokens per drafted step: 1 + accepted / drafts."""
        return 1 + self.accepted / self.drafts if self.drafts else 1.0

    def position_rates(self) -> list[float]:
        """Share of drafted steps whose i-th draft token was accepted."""
        return [n / self.drafts if self.drafts else 0.0 for n in self.accepted_per_pos]


def measure(
    model: Path, prompts: list[list[int]], output_len: int, draft: Path | None, method: str, k: int, batch: int = 8
) -> Acceptance:
    """Run every prompt greedily for ``output_len`` tokens (EOS ignored), ``batch`` at a time
    (``draft`` None: no speculation, for reference outputs)."""
    argv = ["--model", str(model), "--served-model-name", "offline", "--host", "127.0.0.1", "--port", "1"]
    if draft is not None:
        argv += ["--speculative-method", method, "--draft-model", str(draft), "--num-speculative-tokens", str(k)]
    argv += ["--max-running-requests", str(batch), "--num-continuous-decode-steps", "1"]
    p = parser()
    args = p.parse_args(argv)
    check(p, args)
    engine = build(args).engine
    done = threading.Semaphore(0)
    engine.start()
    try:
        seqs = [RequestState(p, output_len, 0.0, 1.0, True, lambda _t, end: end and done.release()) for p in prompts]
        for seq in seqs:
            engine.submit(seq)
        for _ in prompts:
            done.acquire()
    finally:
        engine.stop()
    registry = engine.metrics.registry

    def value(name: str, **labels: str) -> int:
        return int(registry.get_sample_value(f"{PREFIX}{name}_total", labels) or 0)

    per_pos = tuple(value("spec_decode_num_accepted_tokens_per_pos", position=str(i)) for i in range(k))
    return Acceptance(
        value("spec_decode_num_drafts"),
        value("spec_decode_num_draft_tokens"),
        value("spec_decode_num_accepted_tokens"),
        per_pos,
        tuple(tuple(s.tokens[len(s.prompt) :]) for s in seqs),
    )
