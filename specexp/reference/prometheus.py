"""The engine's Prometheus series: vLLM's speculative-decoding counters and request latency
histograms under the ``specexp:`` prefix.

Names and semantics follow vllm/v1/spec_decode/metrics.py and vllm/v1/metrics/loggers.py (see
specexp/engines/counters.py, which reads them), plus ``verify_steps``: target steps that emitted tokens
for a sequence, prefill included, so that over any window Σ completion tokens = Δaccepted +
Δverify_steps exactly. The histograms are observed by the HTTP front end (specexp.reference.api)
when a request finishes, as vLLM observes its own: from the request's arrival at the server.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

PREFIX = "specexp:"
# vLLM's request latency families (seconds) and what each times
LATENCY_HISTOGRAMS = {
    "time_to_first_token_seconds": "Arrival to the first token.",
    "request_time_per_output_token_seconds": "Per request: first to last token / (output tokens - 1).",
    "e2e_request_latency_seconds": "Arrival to the last token.",
    "request_queue_time_seconds": "Arrival to admission into the running batch.",
}
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


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
        self.latency = {
            name: Histogram(PREFIX + name, doc, buckets=BUCKETS, registry=self.registry)
            for name, doc in LATENCY_HISTOGRAMS.items()
        }

    def finished(self, arrival: float, admitted: float, first: float, last: float, tokens: int) -> None:
        """Observe one finished request's latencies (monotonic seconds), as vLLM does (0 TPOT for one token)."""
        h = self.latency
        h["time_to_first_token_seconds"].observe(first - arrival)
        h["request_time_per_output_token_seconds"].observe((last - first) / (tokens - 1) if tokens > 1 else 0.0)
        h["e2e_request_latency_seconds"].observe(last - arrival)
        h["request_queue_time_seconds"].observe(admitted - arrival)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class DepthMetrics:
    """Decode steps by the depth they were scheduled to draft (``--schedule``: the depth for the number
    of running requests; else k everywhere), so a schedule's switches show in the counters. A row near its
    length limit drafts fewer tokens than its step's depth; its tokens still count under that depth."""

    def __init__(self, registry: CollectorRegistry, depths: list[int]) -> None:
        def family(name: str, doc: str) -> Counter:
            return Counter(PREFIX + name, doc, ("depth",), registry=registry)

        steps = family("spec_decode_steps_per_depth", "Decode steps (one forward over the batch) at each depth.")
        rows = family("verify_steps_per_depth", "Sequence decode steps at each depth.")
        drafted = family("spec_decode_num_draft_tokens_per_depth", "Draft tokens proposed at each depth.")
        accepted = family("spec_decode_num_accepted_tokens_per_depth", "Draft tokens accepted at each depth.")
        self.by_depth = {d: tuple(f.labels(depth=str(d)) for f in (steps, rows, drafted, accepted)) for d in depths}

    def count(self, depth: int, rows: int, drafted: int, accepted: int) -> None:
        steps, row_steps, drafted_c, accepted_c = self.by_depth[depth]
        steps.inc()
        row_steps.inc(rows)
        drafted_c.inc(drafted)
        accepted_c.inc(accepted)
