"""The engine's Prometheus series: vLLM's speculative-decoding counters under the ``specexp:`` prefix.

Names and semantics follow vllm/v1/spec_decode/metrics.py (see specexp/engines/counters.py, which reads
them), plus ``verify_steps``: target steps that emitted tokens for a sequence, prefill included, so that
over any window Σ completion tokens = Δaccepted + Δverify_steps exactly.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

PREFIX = "specexp:"


class EngineMetrics:
    def __init__(self, num_speculative_tokens: int) -> None:
        self.registry = CollectorRegistry()

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(PREFIX + name, doc, labels, registry=self.registry)

        self.drafts = counter("spec_decode_num_drafts", "Sequence steps that carried at least one draft token.")
        self.draft_tokens = counter("spec_decode_num_draft_tokens", "Draft tokens proposed.")
        self.accepted = counter("spec_decode_num_accepted_tokens", "Draft tokens accepted (bonus excluded).")
        per_pos = counter(
            "spec_decode_num_accepted_tokens_per_pos", "Draft tokens accepted at each position.", ("position",)
        )
        self.accepted_per_pos = [per_pos.labels(position=str(i)) for i in range(num_speculative_tokens)]
        self.verify_steps = counter(
            "verify_steps", "Target steps that emitted tokens for a sequence, prefill included."
        )
        self.generation_tokens = counter("generation_tokens", "Tokens generated.")
        self.prompt_tokens = counter("prompt_tokens", "Prompt tokens prefilled.")
        self.request_success = counter("request_success", "Requests finished (stop or length).")
        self.running = Gauge(PREFIX + "num_requests_running", "Sequences in the running batch.", registry=self.registry)
        self.waiting = Gauge(PREFIX + "num_requests_waiting", "Requests waiting for a slot.", registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)
