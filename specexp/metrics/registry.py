"""Every metric specexp records, declared once: its key, how it is shown, how it combines, what it means.

The console, the report, the sweep comparison, the tuner's objective check and docs/METRICS.md all
read this table, so a metric's name, unit and meaning cannot drift between them. The keys are an
interface (users query MLflow by them): add freely, never rename or redefine.

A family with ``stats`` stands for one key per statistic (``ttft_ms_p99``); a key ending in ``_<i>``
or ``.<name>`` is one member of a family declared with ``indexed`` or ``labelled``. A metric with
``per_category`` also has one key per prompt category (``accept_length.coding``) when the workload's
prompts carry categories.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Suffixes a sweep adds to a measured key: the 95% half-width, the standard deviation, and the 95%
# interval's bounds (for an interval that is not symmetric: ratios, rates, proportions).
INTERVAL_SUFFIXES = ("_ci95", "_std", "_lo", "_hi")
LATENCY_STATS = ("mean", "p50", "p90", "p99")
LENGTH_STATS = ("mean", "p50", "p90")


@dataclass(frozen=True)
class Peers:
    """What other benchmark tools call a metric, and how theirs differs from specexp's."""

    vllm: str  # `vllm bench serve` (vllm/benchmarks/serve.py)
    aiperf: str  # NVIDIA AIPerf
    guidellm: str
    differs: str


@dataclass(frozen=True)
class Metric:
    key: str
    header: str  # a short column header
    unit: str  # "tok/s", "ms", "req/s", "s", "" (a ratio) or "count"
    digits: int  # decimals shown
    # How measurements of one point combine (repeats, windows): "sum" for counts, "mean" otherwise.
    aggregate: str
    higher_is_better: bool | None  # None: neither (a count, a setting)
    definition: str
    section: str  # the heading it is listed under in docs/METRICS.md
    stats: tuple[str, ...] = ()  # one key per statistic: <key>_<stat>
    indexed: bool = False  # one key per position: <key>_<i>
    labelled: bool = False  # one key per label: <key>.<label>
    per_category: bool = False  # besides <key>, one key per prompt category: <key>.<category>
    level: str = "point"  # "point": every point's run; "sweep": the parent run
    peers: Peers | None = None  # its equivalents in other tools (docs/METRICS.md)

    def names(self) -> tuple[str, ...]:
        """The concrete keys of a plain or per-statistic metric (indexed and labelled ones: the stem)."""
        return tuple(f"{self.key}_{s}" for s in self.stats) if self.stats else (self.key,)


_T, _L, _S, _C, _M, _W = (
    "Throughput",
    "Latency",
    "Speculation",
    "Counts and provenance",
    "How the point was measured",
    "Sweep level",
)
_O = "Load and SLOs"

# A speculative point's ratios to its baseline: key, header, what is divided. closed loop: speedup,
# decode_speedup, goodput_ratio; rate: decode_speedup, goodput_ratio, ttft_ratio, tpot_ratio.
RATIO_METRICS = (
    (
        "speedup",
        "speedup",
        "closed loop only: output_throughput / that of the baseline, the point of the same sweep that differs only "
        "in drafter=none (a rate point has none: both arms carry the offered rate)",
    ),
    ("decode_speedup", "stream speedup", "decode_speed / that of the baseline"),
    ("goodput_ratio", "goodput ratio", "goodput / that of the baseline (with an SLO set)"),
    ("ttft_ratio", "TTFT ratio", "rate points: ttft_ms_mean / that of the baseline at the same offered rate"),
    ("tpot_ratio", "TPOT ratio", "rate points: tpot_ms_mean / that of the baseline at the same offered rate"),
)
_PAIRED = (
    ". One estimand (METRICS.md, One speedup): each arm's windows pooled, Σ value × weight / Σ weight (output "
    "throughput: its output tokens over its window seconds; decode_speed: decode tokens over decode seconds; "
    "goodput over window seconds; latency means over ok requests), the point's over its baseline's. Paired where "
    "the arms' windows took turns (their start and end times show window i of each beside window i of the other, "
    "tag specexp.speedup_method=paired): Student-t over the pairs' differences of relative residuals, pairs − 1 "
    "degrees of freedom; else unpaired (Welch), tag specexp.speedup_method=unpaired. _unpaired holds the same "
    "value with the unpaired interval. The interval is on the log scale: _lo/_hi bound it, _ci95 is half its width"
)

METRICS: tuple[Metric, ...] = (
    Metric(
        "output_throughput",
        "output tok/s",
        "tok/s",
        1,
        "mean",
        True,
        "output tokens served within the window / window seconds: the measured requests' and, in a closed "
        "loop, those of the fillers that keep `batch` in flight until the last measured request ends (no "
        "ramp-down). Per category: the category's Σ output tokens / its Σ e2e seconds × the point's "
        "concurrency (Σ e2e / window), the throughput if every request were like the category's",
        _T,
        per_category=True,
        peers=Peers(
            "Output token throughput (`output_throughput`)",
            "Output Token Throughput (`output_token_throughput`)",
            "output tokens per second (`output_tokens_per_second`)",
            "all three divide every output token by the benchmark's duration, ramp-down included: a point whose "
            "last requests ran with fewer in flight reads lower, a faster arm's window ends sooner",
        ),
    ),
    Metric(
        "output_throughput_pooled",
        "pooled tok/s",
        "tok/s",
        1,
        "mean",
        True,
        "the point's Σ window_output_tokens / Σ window_s over its steady windows: its rate whatever its windows' "
        "lengths (output_throughput is the mean of the windows' rates, for its interval)",
        _T,
    ),
    Metric(
        "request_throughput",
        "req/s",
        "req/s",
        2,
        "mean",
        True,
        "requests that ended ok within the window (fillers included) / window seconds",
        _T,
        peers=Peers(
            "Request throughput (`request_throughput`)",
            "Request Throughput (`request_throughput`)",
            "requests per second (`requests_per_second`)",
            "completed requests / the benchmark's duration, ramp-down included",
        ),
    ),
    Metric(
        "total_throughput",
        "total tok/s",
        "tok/s",
        1,
        "mean",
        True,
        "Σ (input + output) tokens served within the window / window seconds",
        _T,
        peers=Peers(
            "Total token throughput (`total_token_throughput`)",
            "Total Token Throughput (`total_token_throughput`)",
            "total tokens per second (`tokens_per_second`)",
            "over the benchmark's duration, ramp-down included",
        ),
    ),
    Metric(
        "window_s",
        "window s",
        "s",
        2,
        "sum",
        None,
        "the window: its first measured send to its last measured response's end",
        _M,
    ),
    Metric(
        "window_output_tokens",
        "window tokens",
        "count",
        0,
        "sum",
        None,
        "output tokens served within the window, fillers' included (output_throughput's numerator)",
        _M,
    ),
    Metric(
        "decode_speed",
        "stream tok/s",
        "tok/s",
        1,
        "mean",
        True,
        "the single-stream tok/s a user of one stream sees, as a ratio of sums: Σ tokens after the first chunk "
        "/ Σ seconds from the first chunk to the last, over the requests that have both (decode_excluded counts "
        "the others), never a mean of per-request rates (one request whose last chunks came microseconds "
        "apart read 30,807 tok/s and ruled such a mean). A point's is its windows' Σ decode_tokens / Σ decode_s, "
        "its interval the ratio estimator's over the windows: se = √(Σ (tokens_i − R · s_i)² / (n (n − 1))) "
        "/ mean(s_i), Student-t with n − 1 degrees of freedom on the log scale (bounds in _lo/_hi)",
        _T,
        peers=Peers(
            "none (1000 / Mean TPOT is its inverse of a mean)",
            "Output Token Throughput Per User (`output_token_throughput_per_user`)",
            "none (1000 / `inter_token_latency_ms`)",
            "AIPerf's is the mean of per-request ratios, which a request with microseconds between its first and "
            "last chunk inflates without bound; specexp's pools the tokens and the seconds",
        ),
    ),
    Metric(
        "decode_speed_p50",
        "stream tok/s p50",
        "tok/s",
        1,
        "mean",
        True,
        "per request: tokens after the first chunk / seconds from the first chunk to the last, the median over "
        "the requests that have a decode (a percentile stays per request)",
        _T,
    ),
    Metric(
        "decode_tokens",
        "decode tokens",
        "count",
        0,
        "sum",
        None,
        "Σ tokens after the first chunk over the requests with a decode (decode_speed's numerator)",
        _M,
    ),
    Metric(
        "decode_s",
        "decode s",
        "s",
        2,
        "sum",
        None,
        "Σ seconds from the first chunk to the last over the requests with a decode (decode_speed's denominator)",
        _M,
    ),
    Metric(
        "decode_excluded",
        "no decode",
        "count",
        0,
        "sum",
        None,
        "successful requests without a decode rate (a single chunk, or no time between the first and last "
        "chunk): left out of decode_speed and decode_speed_p50",
        _M,
    ),
    Metric(
        "ttft_ms",
        "TTFT",
        "ms",
        1,
        "mean",
        False,
        "first chunk carrying output text − request send",
        _L,
        LATENCY_STATS,
        peers=Peers(
            "TTFT (`ttft`)",
            "Time to First Token (`time_to_first_token`)",
            "`time_to_first_token_ms`",
            "the same definition; the tools differ in when a request counts as sent (after their own "
            "serialisation) and in whether an empty first chunk counts",
        ),
    ),
    Metric(
        "tpot_ms",
        "TPOT",
        "ms",
        2,
        "mean",
        False,
        "per request: (e2e − ttft) / (output tokens − 1)",
        _L,
        LATENCY_STATS,
        peers=Peers(
            "TPOT (`tpot`)",
            "Inter Token Latency (`inter_token_latency`)",
            "`inter_token_latency_ms`",
            "the same per-request quantity under different names: AIPerf's and guidellm's \"ITL\" is this TPOT; "
            "guidellm's own `time_per_output_token_ms` is e2e / output tokens, TTFT included",
        ),
    ),
    Metric(
        "itl_ms",
        "ITL",
        "ms",
        2,
        "mean",
        False,
        "token-normalised: each gap between consecutive chunks divided by the tokens in the later chunk, "
        "counted once per token (a chunk of 3 tokens after 30 ms gives three 10 ms samples)",
        _L,
        LATENCY_STATS,
        peers=Peers(
            "none",
            "none",
            "none",
            "no tool has it: vLLM's ITL is chunk_gap_ms, AIPerf's and guidellm's ITL is tpot_ms; equal to tpot_ms's "
            "mean only with 1-token chunks and no spread between requests",
        ),
    ),
    Metric(
        "chunk_gap_ms",
        "chunk gap",
        "ms",
        2,
        "mean",
        False,
        "the raw gap between consecutive chunks (what vLLM's and SGLang's tools call ITL)",
        _L,
        LATENCY_STATS,
        peers=Peers(
            "ITL (`itl`)",
            "Inter Chunk Latency (`inter_chunk_latency`)",
            "none",
            "the same raw gap: a chunk carrying several tokens (speculation) is one long gap, not several short ones",
        ),
    ),
    Metric(
        "e2e_ms",
        "E2E",
        "ms",
        1,
        "mean",
        False,
        "last chunk − request send",
        _L,
        LATENCY_STATS,
        peers=Peers(
            "E2EL (`e2el`)",
            "Request Latency (`request_latency`)",
            "`request_latency` (seconds)",
            "the same span; guidellm reports it in seconds",
        ),
    ),
    Metric(
        "server_ttft_ms",
        "server TTFT",
        "ms",
        1,
        "mean",
        False,
        "the engine's own time-to-first-token histogram (vLLM, SGLang and the reference engine: "
        "`time_to_first_token_seconds`), Δsum / Δcount around the window: from the request's arrival at the "
        "server, so below ttft_ms by the HTTP round trip",
        _L,
        ("mean",),
    ),
    Metric(
        "server_tpot_ms",
        "server TPOT",
        "ms",
        2,
        "mean",
        False,
        "the engine's `request_time_per_output_token_seconds` histogram (per finished request: decode time / "
        "(output tokens − 1)), Δsum / Δcount around the window; compare with tpot_ms_mean",
        _L,
        ("mean",),
    ),
    Metric(
        "server_e2e_ms",
        "server E2E",
        "ms",
        1,
        "mean",
        False,
        "the engine's `e2e_request_latency_seconds` histogram, Δsum / Δcount around the window",
        _L,
        ("mean",),
    ),
    Metric(
        "server_queue_ms",
        "server queue",
        "ms",
        1,
        "mean",
        False,
        "the engine's queue-time histogram (vLLM `request_queue_time_seconds`, SGLang `queue_time_seconds`): "
        "arrival to admission into the running batch",
        _L,
        ("mean",),
    ),
    Metric(
        "tokens_per_chunk_mean",
        "tok/chunk",
        "",
        2,
        "mean",
        None,
        "output tokens / chunks: the client-side view of tokens per engine step",
        _L,
    ),
    Metric(
        "concurrency",
        "in flight",
        "count",
        1,
        "mean",
        None,
        "requests in flight (send → end, clipped to the window; a closed loop's fillers included) over the "
        "window: time-weighted mean (Σ durations / window seconds) and the most at once; a closed loop's mean "
        "is `batch` up to the gaps between one request's end and the next send",
        _O,
        stats=("mean", "max"),
        peers=Peers(
            "Peak concurrent requests (`max_concurrent_requests`, a per-second maximum)",
            "none (`--concurrency` is the setting)",
            "`request_concurrency`",
            "their closed loops ramp down at the end of the benchmark, so the mean in flight is below the setting",
        ),
    ),
    Metric(
        "offered_rate",
        "offered req/s",
        "req/s",
        2,
        "mean",
        None,
        "open loop (load=rate): the measured requests' scheduled arrivals, (n − 1) / (last arrival − first arrival) "
        "= S; load.rate itself, since a schedule is scaled to offer exactly that over its window (the reference "
        "achieved_rate is read against)",
        _O,
        peers=Peers(
            "`--request-rate` (the setting)",
            "`--request-rate` (the setting)",
            "`--rate` (the setting)",
            "specexp reports what the schedule offered beside the setting",
        ),
    ),
    Metric(
        "achieved_rate",
        "achieved req/s",
        "req/s",
        2,
        "mean",
        True,
        "open loop: the measured arrivals served ok, at the rate they arrived: offered_rate × (requests ok / "
        "measured requests), over the same arrival span S; a server that keeps up reads the offered rate, and "
        "goodput ≤ achieved_rate ≤ offered_rate by construction. Whether completions keep up is read "
        "separately (completion_rate, saturated)",
        _O,
        peers=Peers(
            "Request throughput (`request_throughput`)",
            "Request Throughput (`request_throughput`)",
            "`requests_per_second`",
            "completed requests / the benchmark's duration: a burst that drains can read above the offered rate, "
            "and a short run reads below it by its last request's latency",
        ),
    ),
    Metric(
        "completion_rate",
        "completed req/s",
        "req/s",
        2,
        "mean",
        True,
        "open loop: the successful completions after the first / the seconds from the first to the last; a "
        "point's is its windows' Σ completions / Σ completion_s, with the ratio estimator's interval over the "
        "windows (as decode_speed's)",
        _O,
    ),
    Metric(
        "completions",
        "completions",
        "count",
        0,
        "sum",
        None,
        "open loop: successful completions after the window's first (completion_rate's numerator)",
        _M,
    ),
    Metric(
        "completion_s",
        "completion s",
        "s",
        2,
        "sum",
        None,
        "open loop: seconds from the window's first successful completion to its last (completion_rate's denominator)",
        _M,
    ),
    Metric(
        "saturated",
        "saturated",
        "",
        0,
        "mean",
        None,
        "open loop, per point: 1 when the completions fell behind the arrivals (completion_rate's whole 95% "
        "interval below offered_rate), 0 when its interval does not show that; absent without an interval",
        _O,
    ),
    Metric(
        "queue_ms",
        "queue",
        "ms",
        1,
        "mean",
        False,
        "open loop: request send − scheduled arrival, the time an arrival waited for a slot under load.max_concurrency",
        _O,
        LATENCY_STATS,
    ),
    Metric(
        "goodput",
        "goodput req/s",
        "req/s",
        2,
        "mean",
        True,
        "measured requests meeting every SLO set (first chunk − arrival ≤ slo.ttft_ms, TPOT ≤ slo.tpot_ms; the "
        "arrival is the scheduled one in an open loop) per second: an open loop's at the rate they arrived, "
        "offered_rate × slo_met / measured requests (so goodput ≤ achieved_rate), a closed loop's over the "
        "window seconds; only with an SLO set. Its interval is "
        "made on the log scale (mean × exp(± t · se / mean), bounds in _lo/_hi): never below 0",
        _O,
    ),
    Metric(
        "slo_attainment",
        "SLO met",
        "",
        3,
        "mean",
        True,
        "requests meeting every SLO set / measured requests (a failed request meets none), pooled over the "
        "point's windows; its interval (_lo/_hi, _ci95 half its width) is Clopper-Pearson's exact binomial one "
        "over the requests, never outside [0, 1]; only with an SLO set",
        _O,
    ),
    Metric(
        "slo_met",
        "SLO met n",
        "count",
        0,
        "sum",
        None,
        "measured requests meeting every SLO set (slo_attainment's numerator); only with an SLO set",
        _O,
    ),
    Metric(
        "accept_length",
        "accept len",
        "",
        2,
        "mean",
        True,
        "1 + accepted draft tokens / verify steps (spec_verify_steps: decode steps that verified drafts, prefill "
        "excluded), the same on every engine; 1.0 without speculation. vLLM's own figure is the same; SGLang's "
        "own (Σ completion tokens / Σ spec_verify_ct) counts the prefill token and reads higher. Per category: "
        "from the engine's per-request counts (reference engine, SGLang 0.5.19+)",
        _S,
        per_category=True,
    ),
    Metric(
        "accept_rate",
        "accept rate",
        "",
        2,
        "mean",
        True,
        "accepted draft tokens / proposed draft tokens (absent without speculation)",
        _S,
        per_category=True,
    ),
    Metric(
        "accept_rate_pos",
        "accept rate @i",
        "",
        2,
        "mean",
        True,
        "accepted at draft position i / spec_verify_steps, i = 0 … k−1, where the engine reports it (vLLM's "
        "per-position acceptance rate)",
        _S,
        indexed=True,
    ),
    Metric(
        "spec_verify_steps",
        "verify steps",
        "count",
        0,
        "sum",
        None,
        "verify steps in the window: one sequence's decode step that verified at least one draft token (vLLM "
        "`spec_decode_num_drafts`, SGLang `spec_verify_ct`); prefill and steps that drafted nothing excluded; "
        "the categories' counts add up to it",
        _S,
        per_category=True,
    ),
    Metric(
        "spec_draft_tokens",
        "draft tokens",
        "count",
        0,
        "sum",
        None,
        "draft tokens proposed in the window",
        _S,
        per_category=True,
    ),
    Metric(
        "spec_accepted_tokens",
        "accepted",
        "count",
        0,
        "sum",
        None,
        "draft tokens accepted in the window",
        _S,
        per_category=True,
    ),
    Metric("requests_ok", "ok", "count", 0, "sum", None, "measured requests that completed", _C, per_category=True),
    Metric(
        "requests_failed",
        "failed",
        "count",
        0,
        "sum",
        None,
        "measured requests that failed (any HTTP error, timeout, broken stream)",
        _C,
    ),
    Metric(
        "output_tokens",
        "output tokens",
        "count",
        0,
        "sum",
        None,
        "Σ over successful measured requests",
        _C,
        per_category=True,
    ),
    Metric("input_tokens", "input tokens", "count", 0, "sum", None, "Σ over successful measured requests", _C),
    Metric(
        "input_len",
        "input len",
        "count",
        0,
        "mean",
        None,
        "prompt tokens per successful measured request (the server's usage, chat template included)",
        _C,
        stats=LENGTH_STATS,
    ),
    Metric(
        "output_len",
        "output len",
        "count",
        0,
        "mean",
        None,
        "output tokens per successful measured request: fixed with ignore_eos, the model's own with natural "
        "lengths (up to max_tokens)",
        _C,
        stats=LENGTH_STATS,
    ),
    Metric(
        "server_startup_s",
        "startup s",
        "s",
        1,
        "mean",
        False,
        "launch → ready, on the point that started the server (tag specexp.server_reused says whether it did)",
        _C,
    ),
    Metric(
        "windows",
        "windows",
        "count",
        0,
        "sum",
        None,
        "measured windows the point's metrics are averaged over (consecutive, on one server launch, after the "
        "warm-up phase: workload.warmup requests, then measure.warmup_windows whole windows, discarded)",
        _M,
    ),
    Metric(
        "windows_warmup",
        "warm-up windows",
        "count",
        0,
        "sum",
        None,
        "measured windows discarded as warm-up: always 0 (the warm-up is a stated phase before the first "
        "measured window, measure.warmup_windows; no measured window is dropped after the fact). Before that "
        "rule: leading windows outside the 95% prediction interval of the ones after them",
        _M,
    ),
    Metric(
        "windows_settled",
        "settled",
        "",
        0,
        "mean",
        None,
        "1 when the point reached measure.windows windows; 0 when measure.max_s stopped it before",
        _M,
    ),
    Metric(
        "host_load1",
        "load avg",
        "",
        2,
        "mean",
        None,
        "the host's 1-minute load average at each window's end (the tag specexp.host_cpus gives the cores)",
        _M,
    ),
    Metric(
        "host_cpu_steal",
        "CPU steal",
        "",
        3,
        "mean",
        None,
        "share of the host's CPU time taken by the hypervisor during the window (/proc/stat; absent where unreadable)",
        _M,
    ),
    Metric(
        "client_cpu",
        "client CPU",
        "",
        2,
        "mean",
        None,
        "CPU seconds of specexp's own process (the load client) per second of the window: its share of one core; "
        "near 1 the client, not the server, may set the pace",
        _M,
    ),
    Metric(
        "client_server_gap",
        "client/server gap",
        "",
        3,
        "mean",
        False,
        "the largest |client / server − 1| over tpot_ms_mean and e2e_ms_mean against the engine's own histograms "
        "(server_tpot_ms_mean, server_e2e_ms_mean); above 0.05 the point warns: the client, not the server, may be "
        "setting the numbers. Absent when the engine publishes no histograms, or when the window was read in bursts "
        "(client_burst_share above 0.01: not compared)",
        _M,
    ),
    Metric(
        "client_burst_share",
        "burst share",
        "",
        3,
        "mean",
        False,
        "the share of the measured requests' chunk gaps that collapsed (under 0.1 ms, where no engine steps that "
        "fast) at the start of their request: its first chunk waited in the client's socket and was read in one "
        "burst with the next (the client starved of CPU), which shortens TPOT by about this share; above 0.01 the "
        "window's timings are not compared with the server's (client_server_gap absent) and the point warns",
        _M,
    ),
    *(
        metric
        for key, header, definition in RATIO_METRICS
        for metric in (
            Metric(key, header, "", 2, "mean", key not in ("ttft_ratio", "tpot_ratio"), definition + _PAIRED, _W),
            Metric(
                f"{key}_unpaired",
                f"{header} unpaired",
                "",
                2,
                "mean",
                key not in ("ttft_ratio", "tpot_ratio"),
                f"{key}'s value (the same estimand, over the same windows) with the unpaired interval, the arms' "
                "windows taken as independent: the two arms' relative residual variances added, Welch-Satterthwaite "
                "degrees of freedom, on the log scale; kept beside the paired figure for comparison",
                _W,
            ),
        )
    ),
    Metric(
        "windows_paired",
        "window pairs",
        "count",
        0,
        "sum",
        None,
        "window pairs a speculative point's ratios were estimated from (window i beside its baseline's window i); "
        "0: unpaired (tag specexp.speedup_method says which)",
        _W,
    ),
    Metric(
        "crossover_batch",
        "break-even batch",
        "",
        1,
        "mean",
        True,
        "per drafter (parent run): the batch at which speculation stops winning on output_throughput (speedup "
        "first below 1), interpolated in log2(batch) between measured batches; absent when it always or never "
        "wins. Its 95% bounds (_lo/_hi), from joint draws of every point's speedup distribution (the draws "
        "the verdict's classes are decided on): _lo the 2.5% / m tail of where a draw first falls below 1, _hi "
        "the (1 − 2.5% / m) one of where it last does, m the series' points (Bonferroni, so that the bounds and the "
        "classes hold jointly at 95%); each drawn curve is read between measured batches both linearly and in "
        "log(speedup) (the curve's shape between them is unknown): the earlier first and the later last crossing; "
        "absent where open (a tail of draws below 1 from the first batch on / never below 1)",
        _W,
        labelled=True,
        level="sweep",
    ),
    Metric(
        "crossover_rate",
        "break-even rate",
        "req/s",
        2,
        "mean",
        True,
        "per drafter (parent run), rate sweeps: the request rate at which speculation stops winning on "
        "per-stream decode speed (decode_speedup first below 1), interpolated in log2(rate) between measured "
        "rates; absent when it always or never wins; bounds as crossover_batch's",
        _W,
        labelled=True,
        level="sweep",
    ),
    Metric(
        "slo_max_rate",
        "max rate in SLO",
        "req/s",
        2,
        "mean",
        True,
        "per series (parent run, the baseline included), rate sweeps: the request rate at which slo_attainment "
        "first falls below slo.target, interpolated in log2(rate) between the rate before and that one; absent "
        "when every or no measured rate meets it; bounds drawn from each attainment's Clopper-Pearson "
        "distribution as crossover_batch's",
        _W,
        labelled=True,
        level="sweep",
    ),
)

BY_KEY = {m.key: m for m in METRICS}
_INDEXED = re.compile(r"^(?P<stem>.+)_(?P<i>\d+)$")

# The columns of every table of points (console, markdown) and of a sweep comparison, in order.
TABLE_KEYS = (
    "output_throughput",
    "decode_speed",
    "speedup",
    "accept_length",
    "accept_rate",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "tpot_ms_p50",
)
# What an open loop adds to a table, and what an SLO adds, where a point has them.
RATE_TABLE_KEYS = ("offered_rate", "achieved_rate", "completion_rate")  # completions: saturation
SLO_TABLE_KEYS = ("goodput", "slo_attainment")
COMPARE_KEYS = ("output_throughput", "decode_speed", "accept_length", "ttft_ms_p50", "tpot_ms_p50")
# Metrics summed over a point's windows (and launches) rather than averaged.
COUNT_KEYS = tuple(k for m in METRICS if m.aggregate == "sum" for k in m.names())


def table_keys(rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The columns of a table of flat point rows (report.summary): TABLE_KEYS, then the open loop's and
    the SLO's keys that some row has. Open loops only: the speedup shown is per stream, since below
    saturation every drafter carries the offered rate and their throughputs agree."""
    kinds = {row.get("load.kind") or "closed" for row in rows}
    keys = tuple("decode_speedup" if k == "speedup" and kinds == {"rate"} else k for k in TABLE_KEYS)
    extra = (*(RATE_TABLE_KEYS if "rate" in kinds else ()), *SLO_TABLE_KEYS)
    return keys + tuple(k for k in extra if any(row.get(k) is not None for row in rows))


def lookup(key: str) -> Metric | None:
    """The metric behind a concrete key (``ttft_ms_p99``, ``accept_rate_pos_2``,
    ``crossover_batch.tiny``, ``output_throughput_ci95``); None for a key specexp does not define."""
    for suffix in INTERVAL_SUFFIXES:
        key = key.removesuffix(suffix)
    plain = BY_KEY.get(key)
    if plain is not None and not (plain.stats or plain.indexed or plain.labelled):
        return plain
    stem, _, stat = key.rpartition("_")
    if stem in BY_KEY and stat in BY_KEY[stem].stats:
        return BY_KEY[stem]
    match = _INDEXED.match(key)
    if match and match["stem"] in BY_KEY and BY_KEY[match["stem"]].indexed:
        return BY_KEY[match["stem"]]
    stem = key.split(".", 1)[0]
    if "." in key and stem in BY_KEY and (BY_KEY[stem].labelled or BY_KEY[stem].per_category):
        return BY_KEY[stem]
    return None


def header(key: str) -> str:
    """A column header for a concrete key: the metric's header plus its statistic (``TTFT p99 ms``)."""
    metric = lookup(key)
    if metric is None:
        return key
    if not metric.stats:
        return metric.header
    stat = key.removeprefix(metric.key).lstrip("_")
    if metric.unit not in ("ms", "s"):
        return metric.header if stat == "mean" else f"{metric.header} {stat}"
    return f"{metric.header} {stat} {metric.unit}"


def digits(key: str) -> int:
    metric = lookup(key)
    return metric.digits if metric is not None else 2
