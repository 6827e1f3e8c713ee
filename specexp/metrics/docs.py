"""docs/METRICS.md, generated from the registry so that the contract users read is the one the code
records: ``python -m specexp.metrics.docs`` rewrites it, ``--check`` fails when it is stale."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specexp.metrics.registry import LATENCY_STATS, METRICS, Metric

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "METRICS.md"

INTRO = """\
<!-- Generated from specexp/metrics/registry.py by `python -m specexp.metrics.docs`: edit the registry. -->
# Metrics contract

What every point (one job: one server configuration at one load) records, under these exact
MLflow keys. Users build dashboards, queries and comparisons on these names, so they are an interface:
new keys may be added, none is renamed or redefined. Each key is also in the point's `results.json`
in the job's output folder, written before anything is sent to MLflow.

## The measured window
- Load is closed-loop by default (`load=closed`): `batch` requests in flight at all times until the
  point's prompts are used up. Or open-loop (`load=rate`): requests arrive at `load.rate` per second on
  a seeded schedule (Poisson, or gamma gaps of shape `load.burstiness`, scaled so the window offers
  exactly `load.rate`) whatever is in flight, at most `load.max_concurrency` at once when it is set;
  each request's scheduled `arrival` is in records.jsonl.
- Warm-up requests (default: `batch` of them, or the rate rounded up) run closed-loop first and are
  excluded from every metric below, including the engine's counters and latency histograms: both are
  read after warm-up and again after each window.

- The window runs from the first measured request's send to the last measured response's end. A closed
  loop keeps `batch` requests in flight to its end: a stream whose share of the window's requests is
  done sends fillers (marked `filler` in records.jsonl) until the last measured request ends, and the
  fillers still running are then cut. Fillers count in throughput (their tokens that arrived within the
  window) and concurrency, never in latencies, SLOs or acceptance; so both arms of a sweep run at the
  labelled concurrency, with no ramp-down.
- Warm-up requests are written to records.jsonl too, marked `warmup` (as are the requests of windows
  discarded as warm-up).
- A prompt is never sent twice to the same server within a sweep unless the workload says so
  (prefix caches inflate repeat runs by large factors).
- A point is measured in consecutive windows on one server launch (`measure.windows`, default 8 short
  windows of `workload.num_prompts` requests, default max(4, 2 × batch), or until `measure.rel_ci`),
  after a stated warm-up phase: the warm-up requests, then `measure.warmup_windows` (default 2) whole
  windows at the point's concurrency, discarded. No measured window is dropped. Counts are summed over
  the windows and every other metric is their mean, with a 95% Student-t interval over windows (exact
  scipy quantiles) made where it cannot leave the metric's range: on the log scale for a positive
  quantity (a latency, a throughput, a rate, a length, `accept_length`), on the logit scale for a
  fraction (`accept_rate`, `accept_rate_pos_<i>`, `client_burst_share`, `host_cpu_steal`), plain
  for the rest; `<key>_ci95` is half its width. A ratio of sums (`decode_speed`, `completion_rate`:
  the windows' summed tokens or completions over their summed seconds, never a mean of per-request
  rates) gets the ratio estimator's interval over windows, and a proportion (`slo_attainment`) the
  exact binomial one over requests; every bounded interval has its bounds as `<key>_lo` / `<key>_hi`.
- `measure.rel_ci` is checked only at pre-declared looks (`measure.windows` windows, then 1.5 times as
  many each look, up to `measure.max_windows`); each look spends a share of the 5% (Lan-DeMets'
  O'Brien-Fleming spending, Bonferroni across looks), and a point that stopped there reports every
  interval, and its speedups, at that share's level: stopping early keeps 95%
  (benchmarks/sequential_coverage.py). Its target is the speedup where arms take turns at a load
  with a baseline: all arms stop together at the first look where every speculative arm's paired
  speedup (One speedup, below) is within ± `measure.rel_ci` at that look's level, the baseline
  measuring while any speculative arm does; elsewhere (no baseline among the arms, arms one after
  the other, a single point) a point stops on its own `output_throughput`. The tag
  `specexp.stopped_on` says which (`speedup`, `output_throughput`, or `windows` without a target).
  The verdict says the smallest speedup difference each point's windows could detect at 80% power,
  at the spread they showed.
  Every output prints an interval as `[lo, hi]` and says once how it was made.
- A speculative point's ratios to its baseline (`speedup`, ...) are one estimand, said below (One
  speedup); verdict classes and break-even bounds are read from the same draws of every point's
  distribution.
- A sweep's arms (its servers: `drafter=none,tiny`) take turns where their servers can share the
  machine (`arms`, default auto: no GPU, no fixed port): all up at once, and at each load their
  windows alternate in a serpentine order (A B | B A | A B | B A: each round goes the other way round
  the arms), so a speedup compares measurements a window apart, and a drift linear in time, which
  would favour the arm that goes second in every pair, adds +b to half the pairs and −b to the
  others: it cancels in their mean and widens, never narrows, their spread.
- With `repeats > 1`, each point is measured on that many server launches, interleaved (A B A B); each
  launch is its own run (param `repeat`), and the sweep combines them.
"""

ESTIMAND = """\
## One speedup
Every speedup, ratio and break-even is one pre-declared estimand: **the ratio of the two arms' output
tokens over their window time**, `(Σ tokens_A / Σ seconds_A) / (Σ tokens_B / Σ seconds_B)` over the
arms' measured windows (for the other ratios the same with their own sums: decode tokens over decode
seconds, goodput weighted by window seconds, latency means weighted by ok requests). It is never the
mean of the windows' ratios nor the ratio of the arms' mean window rates: windows of unequal length
make those differ from it, and from each other.

Its 95% interval is on the log scale (never below 0), from each window's relative residual
`(tokens_i − R · seconds_i) / (R · mean seconds)`, the window's share of the error of log R:
- **paired** where the arms' windows took turns (window i of each right beside window i of the other,
  shown by their start and end times): Student-t over the pairs' differences of residuals with
  pairs − 1 degrees of freedom, over those pairs; the drift partners share cancels.
  Tag `specexp.speedup_method=paired`, `windows_paired` = the pairs;
- **unpaired** only where there is no pairing (arms one after the other, windows without times, two
  sweeps compared): the arms' residual variances added, Welch-Satterthwaite degrees of freedom. Tag
  `specexp.speedup_method=unpaired`, `windows_paired` = 0.

The value is the same either way; `<key>_unpaired` keeps the unpaired interval beside the paired one.
Every output says which was used: the tag and `windows_paired` in MLflow and summary.csv, the methods
line of the console, the markdown report and verdict.txt ("paired t over 8 window pairs" / "unpaired
Welch t at 2 of 5 points"), and the verdict marks a point's speedup `unpaired` where its series mixes
paired and unpaired points.
`vllm bench serve`, AIPerf and guidellm each report one run's output tokens over its duration; the
ratio of two such runs is this estimand, unpaired and without an interval.
"""

OUTRO = """\
## Where the numbers come from
Token counts come from the server's `usage` when it gives one (`stream_options.include_usage`), else
from counting chunks; the tag `specexp.token_source` says which. Speculation counts come from the
engine (counter deltas around the window, or per-request fields); the tag `specexp.acceptance` says
`measured`, `none` (no speculation) or `unavailable`. The `server_*_ms_mean` keys come from the
engine's own latency histograms (deltas around each window); a window whose client TPOT or e2e mean is
more than 5% away from the server's is warned about, and `client_server_gap` carries the figure. A window
whose first chunks the client read late, in bursts (`client_burst_share` above 0.01: it was starved of
CPU and its timings are its own), is not compared, and the point says so.
`engine=external` asks the server what it is (`engine.flavor`, tag `specexp.external_flavor`); what a
plain OpenAI endpoint cannot give is named in the tag `specexp.unavailable`.

## Tags every run carries
`specexp.sweep_id` (shared by the jobs of one multirun), `specexp.server_key` (a hash of every setting
that changes the server process), `specexp.server_reused`, `specexp.status` (`ok` / `failed`),
`specexp.engine_version`, `specexp.git_sha`, `specexp.hardware` (the CPU model and cores, the GPUs the
server may use: what a stored required-acceptance map is matched by). Params: the flattened resolved
config (`engine.name`, `drafter.name`, `batch`, …).

## Sweep level
A speculative point's baseline is the point of the same sweep that differs only in having
`drafter=none`; the parent run of a multirun carries `summary.csv`, the verdict and the plots.
"""


def _keys(metric: Metric) -> str:
    if metric.stats:
        stats = "`, `".join(f"_{s}" for s in metric.stats)
        return f"`{metric.key}` (`{stats}`)"
    if metric.indexed:
        return f"`{metric.key}_<i>`"
    if metric.labelled:
        return f"`{metric.key}.<drafter>`"
    if metric.per_category:
        return f"`{metric.key}`, `{metric.key}.<category>`"
    return f"`{metric.key}`"


def _better(metric: Metric) -> str:
    return {True: "higher", False: "lower", None: ""}[metric.higher_is_better]


def render() -> str:
    sections: dict[str, list[Metric]] = {}
    for metric in METRICS:
        sections.setdefault(metric.section, []).append(metric)
    parts = [INTRO]
    for title, metrics in sections.items():
        lines = [f"## {title}", "| key | unit | combines by | better | definition |", "| --- | --- | --- | --- | --- |"]
        for m in metrics:
            where = " (parent run)" if m.level == "sweep" else ""
            lines.append(f"| {_keys(m)} | {m.unit} | {m.aggregate} | {_better(m)} | {m.definition}{where} |")
        if title == "Latency":
            lines.append("")
            lines.append(f"Latencies are in milliseconds, each with the suffixes `_{'`, `_'.join(LATENCY_STATS)}`.")
        parts.append("\n".join(lines) + "\n")
    parts.append(_peers())
    parts.append(ESTIMAND)
    parts.append(OUTRO)
    return "\n".join(parts)


def _peers() -> str:
    """The table of what `vllm bench serve`, AIPerf and guidellm call each metric, and how theirs differs."""
    lines = [
        "## The same numbers in other tools",
        "What `vllm bench serve`, NVIDIA AIPerf and guidellm call each latency and throughput metric, and how "
        "theirs differs. \"ITL\" is the trap: vLLM's is specexp's `chunk_gap_ms`, AIPerf's and guidellm's is "
        "specexp's `tpot_ms`, and specexp's `itl_ms` is per token.",
        "",
        "| key | vllm bench serve | AIPerf | guidellm | how they differ |",
        "| --- | --- | --- | --- | --- |",
    ]
    for m in METRICS:
        if m.peers is not None:
            p = m.peers
            lines.append(f"| {_keys(m)} | {p.vllm} | {p.aiperf} | {p.guidellm} | {p.differs} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specexp.metrics.docs", description=__doc__)
    p.add_argument("--check", action="store_true", help="exit 1 when docs/METRICS.md differs from the registry")
    args = p.parse_args(argv)
    return write_or_check(DOC_PATH, render(), args.check, "python -m specexp.metrics.docs")


def write_or_check(path: Path, text: str, check: bool, regenerate: str) -> int:
    """A generated page written, or (``check``) compared with ``text``: exit 1 naming ``regenerate``
    when it is stale, as CI runs it (this page and docs/reference/config.md)."""
    if check:
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            print(f"{path} is stale: run {regenerate}", file=sys.stderr)
            return 1
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
