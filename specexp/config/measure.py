"""How a point is measured and kept: the load (closed batch or open rate), latency targets (slo),
when enough windows are measured (measure), and where results go (tracking)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from specexp.config.errors import ConfigError
from specexp.config.trace_file import TraceRequest, read_trace

LOAD_KINDS = ("closed", "rate")
ARMS = ("auto", "alternate", "sequential")


@dataclass
class LoadConfig:
    """How requests arrive. closed: ``batch`` streams, each sending its next request when the last one
    ends. rate: an open loop, requests arriving at ``rate`` per second whatever is in flight, as a
    deployment sees them; gaps are gamma-distributed with shape ``burstiness`` (1.0: Poisson, < 1
    burstier, > 1 more regular), drawn from a generator seeded by ``seed`` and the repeat. The rate may
    change over the window (``profile``), or the arrivals replay a trace (``path``); then ``rate`` is
    derived (the profile's peak, the trace's mean) and sizes the warm-up."""

    # The load preset's name (load=closed, rate).
    name: str = "closed"
    kind: str = "closed"  # one of LOAD_KINDS
    rate: float | None = None  # rate: requests per second (conf/load/rate.yaml reads the root key `rate`)
    # Gamma shape of the gaps between arrivals: 1 is Poisson, < 1 burstier, > 1 more regular.
    burstiness: float = 1.0
    # rate: requests in flight at most; later arrivals wait in the client (queue_ms) and the server is
    # sized to the sweep's largest cap. None: no cap (then engine.max_running_requests sizes the server).
    max_concurrency: int | None = None
    # Seeds the arrival schedule (with the repeat and the window).
    seed: int = 0
    # A rate that changes: [[t_s, rate], ...], each step's rate (requests/s) from its t_s (the first at 0)
    # to the next one's, the last to duration_s; the arrival process is the rate's (burstiness, seed).
    # Each step is a phase of the results (phases.csv).
    profile: list[Any] | None = None  # [[t_s, rate], ...] (OmegaConf cannot type nested floats)
    duration_s: float | None = None  # profile: when its last step ends (seconds)
    # A trace to replay (load=trace): Mooncake .jsonl (timestamp ms, input_length, output_length) or
    # Azure .csv (TIMESTAMP, ContextTokens, GeneratedTokens); prompts of its input lengths (random ids,
    # or a dataset's prompts chosen and cut to them; at most workload.input_len), answers of its output
    # lengths (at most workload.output_len).
    path: str | None = None
    time_scale: float = 1.0  # trace: its times multiplied by this (0.5 replays it twice as fast)
    window_s: list[float] | None = None  # trace: [start, end) seconds after its first request to replay
    max_requests: int | None = None  # trace: at most this many requests of the slice
    phase_s: float = 60.0  # trace: results per phase of this many seconds of the replay

    def __post_init__(self) -> None:
        if self.kind not in LOAD_KINDS:
            raise ConfigError("load.kind", f"unknown kind {self.kind!r}", f"use one of {LOAD_KINDS}")
        if self.kind == "closed":
            if self.rate is not None:
                raise ConfigError("load.rate", "a closed loop has no request rate", "use load=rate, or drop load.rate")
            if self.profile is not None or self.path is not None:
                which = "load.profile" if self.profile is not None else "load.path"
                raise ConfigError(which, "a closed loop has no arrivals to schedule", "add load=rate (or load=trace)")
            return
        if self.profile is not None and self.path is not None:
            raise ConfigError("load.profile", "a profile and a trace (load.path) both set arrivals", "keep one")
        if self.profile is not None:
            self._derive_rate("load.profile", max(rate for _, _, rate in self.steps()))
        elif self.path is not None:
            self._derive_rate("load.path", self._trace_rate())
        if self.rate is None or not self.rate > 0:
            raise ConfigError(
                "load.rate",
                f"an open loop needs a rate > 0 requests/s, not {self.rate}",
                "add rate=4 (requests/s), or rate=1,2,4,8 -m to sweep it",
            )
        if self.rate == math.inf:  # vllm bench serve's "all at once" is a closed loop's first wave here
            raise ConfigError(
                "load.rate",
                "inf is no arrival rate: every request at once is a burst, not an open loop",
                "give a finite rate (rate=64), or send them all at once with load=closed batch=<requests>",
            )
        if not self.burstiness > 0:
            raise ConfigError("load.burstiness", f"{self.burstiness} <= 0", "use 1.0 for Poisson, < 1 for bursts")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ConfigError("load.max_concurrency", f"{self.max_concurrency} < 1", "use null (no cap) or >= 1")

    def _derive_rate(self, key: str, rate: float) -> None:
        """Set ``rate`` from the profile or trace (the same value again is fine: a config read back)."""
        if self.rate is not None and not math.isclose(self.rate, rate):
            raise ConfigError("load.rate", f"{key} sets the rate ({rate:g}/s), and rate is {self.rate:g}", "drop rate")
        self.rate = rate

    def steps(self) -> list[tuple[float, float, float]]:
        """The profile as (start, end, rate) steps; a ConfigError naming what is wrong with it."""
        fix = "give load.profile=[[0,2],[10,8],[20,2]] (start s, requests/s) and load.duration_s=30"
        rows = self.profile or []
        if not rows or any(len(row) != 2 for row in rows):
            raise ConfigError("load.profile", f"{rows} is not a list of [t_s, rate] pairs", fix)
        starts = [float(t) for t, _ in rows]
        if starts[0] != 0 or any(b <= a for a, b in itertools.pairwise(starts)):
            raise ConfigError("load.profile", f"its times {starts} do not increase from 0", fix)
        if bad := [r for _, r in rows if not 0 < float(r) < math.inf]:
            raise ConfigError("load.profile", f"rates {bad} are not > 0 requests/s", fix)
        if self.duration_s is None or not self.duration_s > starts[-1]:
            raise ConfigError(
                "load.duration_s", f"{self.duration_s} does not end the last step (from {starts[-1]:g} s)", fix
            )
        ends = [*starts[1:], float(self.duration_s)]
        return [(s, e, float(r)) for s, e, (_, r) in zip(starts, ends, rows, strict=True)]

    def _trace_rate(self) -> float:
        """The trace slice's mean rate, after checking the keys that select it and reading it whole."""
        if not self.time_scale > 0:
            raise ConfigError("load.time_scale", f"{self.time_scale} <= 0", "use 1 (as recorded), < 1 faster")
        if self.max_requests is not None and self.max_requests < 1:
            raise ConfigError("load.max_requests", f"{self.max_requests} < 1", "replay at least one, or null")
        if self.window_s is not None and not (len(self.window_s) == 2 and 0 <= self.window_s[0] < self.window_s[1]):
            raise ConfigError("load.window_s", f"{self.window_s} is no [start, end)", "e.g. load.window_s=[0,600]")
        if not self.phase_s > 0:
            raise ConfigError("load.phase_s", f"{self.phase_s} <= 0", "give the seconds of one phase, e.g. 60")
        trace = self.trace()
        span = trace[-1].at
        return (len(trace) - 1) / span if span > 0 else float(len(trace))

    def trace(self) -> list[TraceRequest]:
        """The slice of the trace this load replays (specexp.config.trace_file)."""
        return read_trace(str(self.path), self.time_scale, self.window_s, self.max_requests)


@dataclass
class SloConfig:
    """Latency targets a request must meet to count in ``goodput`` (unset ones are not checked);
    ``target``: the fraction of requests that must meet them for a rate to count as sustained."""

    ttft_ms: float | None = None  # from the request's scheduled arrival, so client-side queueing counts
    # Time per output token target, ms (with ttft_ms, what goodput counts).
    tpot_ms: float | None = None
    # Share of requests that must meet the targets for a load to be sustained.
    target: float = 0.9

    def __post_init__(self) -> None:
        for key in ("ttft_ms", "tpot_ms"):
            value = getattr(self, key)
            if value is not None and not value > 0:
                raise ConfigError(f"slo.{key}", f"{value} <= 0", "give a positive number of milliseconds, or null")
        if not 0 < self.target <= 1:
            raise ConfigError("slo.target", f"{self.target} is not in (0, 1]", "use a fraction, e.g. slo.target=0.9")

    @property
    def given(self) -> bool:
        return self.ttft_ms is not None or self.tpot_ms is not None


@dataclass
class MeasureConfig:
    """How long a point is measured: consecutive windows on one server launch, each of
    ``workload.num_prompts`` requests, until enough steady windows (or a precision target)."""

    # Measured windows per point (the least, with rel_ci); 1: no interval. Eight short windows (half the
    # requests each that three long ones had) at about 4/3 of their cost: a paired speedup's Student-t
    # has pairs - 1 degrees of freedom (t = 2.36 at 7, 4.30 at 2), and partners a short window apart
    # share more of the machine's state (docs/METRICS.md).
    windows: int = 8
    # Precision target: more windows until the half-width / value <= rel_ci, checked only at pre-declared
    # looks (windows, then 1.5x each, up to max_windows), each interval at its look's share of the 5%
    # (O'Brien-Fleming spending: specexp.metrics.sequential), so that stopping early keeps 95%. Arms taking
    # turns with a baseline (drafter=none) stop together once every speedup is that precise; otherwise a
    # point stops on its own output_throughput (specexp.metrics.joint_stop; tag specexp.stopped_on).
    rel_ci: float | None = None
    max_windows: int = 24  # the most measured windows per point
    max_s: float | None = None  # the most seconds of windows per point; None: no limit
    # Whole windows (workload.num_prompts requests in a closed loop at the point's concurrency) run and
    # discarded after the warm-up requests, before the first measured window: the stated warm-up phase.
    # Two short windows: the requests one long window had.
    warmup_windows: int = 2

    def __post_init__(self) -> None:
        if self.windows < 1:
            raise ConfigError("measure.windows", f"{self.windows} < 1", "measure at least one window (3 for intervals)")
        if self.max_windows < self.windows:
            raise ConfigError(
                "measure.max_windows", f"{self.max_windows} < measure.windows {self.windows}", "raise max_windows"
            )
        if self.rel_ci is not None and not 0 < self.rel_ci < 1:
            raise ConfigError("measure.rel_ci", f"{self.rel_ci} is not a fraction", "use e.g. 0.03 for ±3%, or null")
        if self.rel_ci is not None and self.windows < 2:
            raise ConfigError("measure.windows", "a precision target needs an interval", "use measure.windows >= 2")
        if self.max_s is not None and self.max_s <= 0:
            raise ConfigError("measure.max_s", f"{self.max_s} <= 0", "give a positive number of seconds, or null")
        if self.warmup_windows < 0:
            raise ConfigError("measure.warmup_windows", f"{self.warmup_windows} < 0", "use 0 (none) or more")


@dataclass
class TrackingConfig:
    # false: measure and write folders only (upload later with python -m specexp.sync).
    enabled: bool = True
    uri: str = MISSING  # default sqlite:///<outputs>/mlflow.db (conf/tracking/mlflow.yaml)
    # The MLflow experiment the runs go to.
    experiment: str = "specexp"
    # Seconds between MLflow's system-metrics samples (CPU, memory, GPUs) in each point's measured
    # window; 0 turns them off.
    system_metrics_interval_s: float = 1.0
    # The port of the `mlflow ui --port` command specexp prints for a local store, and of its links.
    ui_port: int = 5000

    def __post_init__(self) -> None:
        if not 0 < self.ui_port < 65536:
            raise ConfigError("tracking.ui_port", f"{self.ui_port} is not a port", "give a port from 1 to 65535")
        if self.system_metrics_interval_s < 0:
            raise ConfigError(
                "tracking.system_metrics_interval_s", "must be >= 0", "give seconds between samples, or 0 for none"
            )
