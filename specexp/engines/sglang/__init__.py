"""SGLang adapter: argv, environment, offline argv check and acceptance for ``sglang.launch_server``.

SGLang lives in its own environment (``engine.python``); specexp never imports it. Facts that change
across versions are read from the installed package by a small probe run in that interpreter, and
each rule below names the SGLang version and file it comes from (wheels 0.3.5 … 0.5.23 were read).

Per-request acceptance, by version:
- >= 0.5.19: ``/v1/completions`` with ``return_spec_tokens_details: true`` streams one extra chunk,
  ``{"choices": [], "sglext": {"spec_tokens_details": {...}}}``, before the usage chunk
  (srt/entrypoints/openai/serving_completions.py, protocol.py ``SpecTokensDetails``). specexp reads
  ``spec_verify_ct``, ``spec_num_correct_drafts`` and ``spec_num_proposed_drafts`` from it: exact per
  request, and only the measured requests count.
- 0.5.13 - 0.5.18: no per-request fields on the OpenAI endpoints; the cumulative counters
  ``sglang:generation_tokens_total`` and ``sglang:spec_verify_calls_total`` on ``/metrics`` (with
  ``--enable-metrics``; srt/observability/metrics_collector.py) give the window's acceptance length
  from deltas. They are incremented when a request finishes, so warm-up must finish before the
  first scrape.
- older: only native ``/generate`` ``meta_info`` carries them, which the streaming client does not
  use; acceptance is then unavailable. ``/server_info``'s ``avg_spec_accept_length`` is a
  server-lifetime average and is never used as a point's number.
Acceptance length is SGLang's (and SpecForge's) Σcompletion_tokens / Σspec_verify_ct: the first
token, from prefill, is counted in the numerator, so it reads slightly above tokens per verify step.
"""

from specexp.engines.sglang.adapter import SglangEngine, SglangEngineConfig

__all__ = ["SglangEngine", "SglangEngineConfig"]
