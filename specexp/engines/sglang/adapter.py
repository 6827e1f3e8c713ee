"""SGLang adapter: the config schema, launch argv and environment, the offline argv check and acceptance."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specexp.config import Config, ConfigError, EngineConfig
from specexp.context import Launch
from specexp.engines import counters
from specexp.engines.base import Command, Engine
from specexp.engines.sglang import spec_counts as acceptance
from specexp.engines.sglang.argcheck import check_argv
from specexp.engines.sglang.versions import (
    PINNED_VERSION,
    Installed,
    Release,
    acceptance_source,
    cuda_graph_flag,
    overlap_scheduled,
    overwritten_env,
    probe,
    release,
)
from specexp.metrics.acceptance import AcceptanceCounts
from specexp.records import RequestRecord

if TYPE_CHECKING:
    import aiohttp

LAUNCH_MODULE = "sglang.launch_server"
INSTALL_HINT = (
    "bash scripts/install_sglang_light.sh (argv checks only) or install sglang on the GPU box, then set "
    "engine.python=<that venv>/bin/python"
)

# specexp drafter.method -> --speculative-algorithm. NEXTN is SGLang's MTP spelling and becomes EAGLE
# (srt/arg_groups/speculative_hook.py _resolve_speculative_algorithm_alias); a plain draft model is
# STANDALONE (0.5.5+).
ALGORITHMS = {
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "NEXTN",
    "draft_model": "STANDALONE",
    "standalone": "STANDALONE",
    "ngram": "NGRAM",
}

# Flags specexp derives from the config: argparse keeps the last occurrence silently, so one repeated
# in engine.extra_args would override the config without a trace.
MANAGED_FLAGS = frozenset(
    {
        "--model-path",
        "--served-model-name",
        "--host",
        "--port",
        "--tp-size",
        "--dp-size",
        "--ep-size",
        "--tokenizer-path",
        "--trust-remote-code",
        "--context-length",
        "--max-running-requests",
        "--cuda-graph-max-bs",
        "--cuda-graph-max-bs-decode",
        "--mem-fraction-static",
        "--attention-backend",
        "--enable-metrics",
        "--disable-overlap-schedule",
        "--num-continuous-decode-steps",
        "--speculative-algorithm",
        "--speculative-draft-model-path",
        "--speculative-draft-model",
        "--speculative-num-steps",
        "--speculative-eagle-topk",
        "--speculative-num-draft-tokens",
        "--speculative-ngram-max-bfs-breadth",
        "--speculative-adaptive",
        "--speculative-adaptive-config",
    }
)

# The algorithms SGLang 0.5.23 varies the depth for; it turns --speculative-adaptive off for the others
# with a warning only (srt/speculative/adaptive_spec_params.py adaptive_unsupported_reason).
ADAPTIVE_METHODS = ("eagle", "eagle3")


@dataclass
class SglangEngineConfig(EngineConfig):
    """SGLang server settings beyond the shared ones. Flags not modelled here go in extra_args."""

    name: str = "sglang"
    dp_size: int = 1  # --dp-size: data-parallel replicas, each of model.tp GPUs
    ep_size: int = 1  # --ep-size: expert parallelism inside the TP group (MoE models)
    mem_fraction_static: float | None = None  # None: SGLang's own choice per GPU
    attention_backend: str | None = None  # None: SGLang's default for the model and GPU
    enable_metrics: bool = True  # /metrics: gauges, and the counter acceptance fallback (0.5.13-0.5.18)
    # Decode CUDA-graph batch limit; None: the server's capacity (above it decode runs eagerly).
    cuda_graph_max_bs: int | None = None
    disable_overlap_schedule: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("dp_size", "ep_size"):
            if getattr(self, key) < 1:
                raise ConfigError(f"engine.{key}", f"{getattr(self, key)} < 1", "use 1 or more")
        if self.mem_fraction_static is not None and not 0 < self.mem_fraction_static < 1:
            raise ConfigError(
                "engine.mem_fraction_static", f"{self.mem_fraction_static} is not in (0, 1)", "use e.g. 0.85, or null"
            )
        if self.cuda_graph_max_bs is not None and self.cuda_graph_max_bs < 1:
            raise ConfigError("engine.cuda_graph_max_bs", f"{self.cuda_graph_max_bs} < 1", "use null or a batch size")

    def default_gpus(self, cfg: Config) -> int:
        return cfg.model.tp * self.dp_size  # --dp-size replicas of a model.tp group each

    def check(self, cfg: Config) -> None:
        d = cfg.drafter
        d.refuse_synthetic(
            "SGLang has no such server argument (its SGLANG_SIMULATE_ACC_LEN environment variable draws "
            "lengths its own way, unchecked by its parser)",
        )
        if d.speculative and d.method not in ALGORITHMS:
            raise ConfigError(
                "drafter.method",
                f"SGLang has no speculative algorithm for {d.method!r}",
                f"use one of {sorted(ALGORITHMS)}",
            )
        if cfg.model.tp % self.ep_size:
            raise ConfigError(
                "engine.ep_size",
                f"{self.ep_size} does not divide model.tp={cfg.model.tp} (SGLang runs experts inside the TP group)",
                "use a divisor of model.tp",
            )
        if self.cuda_graph_max_bs is not None and self.cuda_graph_max_bs < cfg.capacity:
            raise ConfigError(
                "engine.cuda_graph_max_bs",
                f"{self.cuda_graph_max_bs} < the server's capacity {cfg.capacity}: larger batches would decode "
                "without CUDA graphs and the sweep would measure that instead",
                "leave it null (specexp uses the capacity) or raise it",
            )
        if d.schedule is not None and d.method not in ADAPTIVE_METHODS:
            raise ConfigError(
                "drafter.schedule",
                f"SGLang varies the depth for EAGLE/EAGLE3 only and would run {d.method} at a fixed depth",
                "drop drafter.schedule or use an eagle/eagle3 drafter",
            )
        if d.schedule is not None and self.dp_size > 1:
            raise ConfigError(
                "drafter.schedule",
                "SGLang turns its adaptive depth off under data parallelism (ranks would pick different depths)",
                "drop drafter.schedule or use engine.dp_size=1",
            )
        # srt/arg_groups/speculative_hook.py (0.5.23) _handle_eagle_family.
        if d.speculative and d.topk > 1 and self.attention_backend == "trtllm_mha":
            raise ConfigError(
                "drafter.topk",
                "SGLang's trtllm_mha attention backend only supports topk=1",
                "use topk=1 or another backend",
            )
        for arg in self.extra_args:
            flag = arg.split("=", 1)[0]
            if flag in MANAGED_FLAGS:
                raise ConfigError(
                    "engine.extra_args",
                    f"{flag} is set by specexp from the config and a second copy would silently win",
                    "set it through its config key (model.*, drafter.*, decode, engine.*)",
                )


def adaptive_config(cfg: Config) -> Path:
    """drafter.schedule as SGLang's adaptive config file, under outputs/schedules/ and named by its content
    (the flag takes a path only; the file is written once and never changes)."""
    text = json.dumps(cfg.drafter.depth_schedule.sglang_adaptive(), indent=1, sort_keys=True) + "\n"
    path = Path(cfg.outputs) / "schedules" / f"sglang-adaptive-{hashlib.sha256(text.encode()).hexdigest()[:12]}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path.resolve()


class SglangEngine(Engine):
    name = "sglang"
    config_class = SglangEngineConfig

    def installed(self, cfg: Config) -> Installed | None:
        return probe(tuple(self.python(cfg)))

    def installed_version(self, cfg: Config) -> str | None:
        """The SGLang version engine.python imports; None when it has none (dry runs still work)."""
        found = self.installed(cfg)
        return found.version if found else None

    def version(self, cfg: Config) -> str | None:
        return self.installed_version(cfg)

    def _release(self, cfg: Config) -> Release:
        found = self.installed(cfg)
        return found.release if found else release(PINNED_VERSION)

    def _decode_steps_ignored(self, cfg: Config) -> bool:
        found = self.installed(cfg)
        return cfg.decode != 1 and found is not None and not found.decode_steps_readers

    def server_args(self, cfg: Config, port: int, launch: Launch | None = None) -> list[str]:
        """Flags after ``-m sglang.launch_server``."""
        e: SglangEngineConfig = cfg.engine
        m = cfg.model
        launch = launch or Launch.of(cfg)
        capacity = launch.capacity
        args = [
            "--model-path", m.path,
            "--served-model-name", launch.served_name,
            "--host", e.host,
            "--port", str(port),
            "--tp-size", str(m.tp),
            "--dp-size", str(e.dp_size),
            "--ep-size", str(e.ep_size),
            # Without it SGLang caps running requests at 48 under speculation.
            "--max-running-requests", str(capacity),
            cuda_graph_flag(self._release(cfg)), str(e.cuda_graph_max_bs or capacity),
            # Ignored by every version since 0.3.6 (see _PROBE); passed so the command states the intent.
            "--num-continuous-decode-steps", str(cfg.decode),
        ]  # fmt: skip
        if m.tokenizer:
            args += ["--tokenizer-path", m.tokenizer]
        if m.trust_remote_code:
            args.append("--trust-remote-code")
        if m.max_model_len:
            args += ["--context-length", str(m.max_model_len)]
        if e.mem_fraction_static is not None:
            args += ["--mem-fraction-static", str(e.mem_fraction_static)]
        if e.attention_backend:
            args += ["--attention-backend", e.attention_backend]
        if e.enable_metrics:
            args.append("--enable-metrics")
        if e.disable_overlap_schedule:
            args.append("--disable-overlap-schedule")
        return [*args, *self._speculation_args(cfg), *e.extra_args]

    def _speculation_args(self, cfg: Config) -> list[str]:
        """All three depth flags, always: a partial set trips an assert in SGLang, and none lets it pick
        a depth per model family, which the sweep would not record."""
        d = cfg.drafter
        if not d.speculative:
            return []
        args = ["--speculative-algorithm", ALGORITHMS[d.method]]
        if d.path:
            args += ["--speculative-draft-model-path", d.path]
        args += [
            "--speculative-num-steps", str(d.num_steps),
            "--speculative-eagle-topk", str(d.topk),
            "--speculative-num-draft-tokens", str(d.draft_tokens),
        ]  # fmt: skip
        if d.method == "ngram":
            # NGRAM takes its branching from the BFS breadth and overrides eagle_topk with it (0.5.23).
            args += ["--speculative-ngram-max-bfs-breadth", str(d.topk)]
        if d.schedule is not None:
            args += ["--speculative-adaptive", "--speculative-adaptive-config", str(adaptive_config(cfg))]
        return args

    def command(self, cfg: Config, port: int, launch: Launch | None = None) -> Command:
        argv = [*self.python(cfg), "-m", LAUNCH_MODULE, *self.server_args(cfg, port, launch)]
        return Command(argv, self.server_env(cfg))

    def preflight(self, cfg: Config, command: Command) -> list[str]:
        found = self.installed(cfg)
        python = self.python(cfg)
        if found is None:
            raise ConfigError("engine.python", f"SGLang is not importable by {' '.join(python)}", INSTALL_HINT)
        args = command.argv[command.argv.index(LAUNCH_MODULE) + 1 :]
        try:
            (verdict,) = check_argv(python, [args], {**os.environ, **command.env})
        except (OSError, subprocess.TimeoutExpired, RuntimeError) as exc:
            raise ConfigError("engine.python", str(exc), INSTALL_HINT) from exc
        if verdict is not None:
            raise ConfigError(
                "engine",
                f"SGLang {found.version} rejects the launch command: {verdict}",
                "fix the flag it names (engine.extra_args or the setting behind it), or use an SGLang that has it",
            )
        return self.notes(cfg, found)

    def notes(self, cfg: Config, found: Installed) -> list[str]:
        """What the user should know before the numbers: settings SGLang changes or ignores."""
        d = cfg.drafter
        rel = found.release
        notes = []
        if d.speculative and d.topk == 1 and d.num_draft_tokens not in (None, d.num_steps + 1):
            notes.append(
                f"drafter.num_draft_tokens={d.num_draft_tokens} becomes {d.num_steps + 1}: with topk=1 SGLang "
                "verifies a chain of num_steps + 1 tokens"
            )
        if d.schedule is not None:
            notes.append(
                "drafter.schedule: SGLang picks a batch's depth by its size padded up to the next CUDA-graph batch "
                "size, so a range starting at batch b takes over right after the largest graph size below b"
            )
        if self._decode_steps_ignored(cfg):
            notes.append(
                f"decode={cfg.decode}: SGLang {found.version} parses --num-continuous-decode-steps but "
                "nothing reads it (tagged specexp.decode_steps_ignored=true); the point runs one decode step at a time"
            )
        env = self.server_env(cfg)
        for key, value in overwritten_env(rel, env, cfg.engine.extra_args).items():
            notes.append(f"SGLang {found.version} overwrites {key}={env[key]} with {value} at startup")
        if not overlap_scheduled(rel, cfg, env) and not cfg.engine.disable_overlap_schedule:
            notes.append(f"SGLang {found.version} turns the overlap scheduler off under speculation")
        if d.speculative and acceptance_source(rel) == "none":
            notes.append(f"SGLang {found.version} reports no acceptance over /v1/completions (0.5.13+ does)")
        if d.speculative and acceptance_source(rel) == "metrics" and not cfg.engine.enable_metrics:
            notes.append(f"SGLang {found.version} reports acceptance only on /metrics: set engine.enable_metrics=true")
        return notes

    def tags(self, cfg: Config) -> dict[str, str]:
        rel = self._release(cfg)
        env = self.server_env(cfg)
        tags = {
            "specexp.sglang_cuda_graph_flag": cuda_graph_flag(rel),
            "specexp.sglang_overlap": str(overlap_scheduled(rel, cfg, env)).lower(),
            "specexp.acceptance_source": acceptance_source(rel) if cfg.drafter.speculative else "none",
        }
        if self._decode_steps_ignored(cfg):
            tags["specexp.decode_steps_ignored"] = "true"
        overwritten = overwritten_env(rel, env, cfg.engine.extra_args)
        if overwritten:
            tags["specexp.sglang_env_overwritten"] = ",".join(f"{k}={v}" for k, v in sorted(overwritten.items()))
        return tags

    def request_fields(self, cfg: Config) -> dict[str, Any]:
        # Completion and chat requests both take it (protocol.py CompletionRequest, ChatCompletionRequest);
        # older servers ignore the unknown field (pydantic's default extra="ignore"). No return_token_ids:
        # 0.5.23 refuses it on streamed chat (serving_chat.py).
        return {"return_spec_tokens_details": True} if cfg.drafter.speculative else {}

    def observe(self, event: dict[str, Any], record: RequestRecord) -> None:
        acceptance.observe(event, record)

    async def read_counters(self, http: aiohttp.ClientSession, base_url: str) -> dict[str, float] | None:
        import aiohttp  # loaded by now (http is its session); not on the command line's light path

        try:
            found = await counters.scrape(http, f"{base_url}{self.metrics_path}", "sglang:")
        except aiohttp.ClientResponseError:  # 404 without --enable-metrics
            return None
        wanted = (acceptance.GENERATION_TOKENS, acceptance.VERIFY_CALLS, acceptance.REQUESTS)
        return {key: v for key, v in found.items() if key in wanted or key.endswith(("_sum", "_count"))}

    def acceptance(
        self, before: dict[str, float] | None, after: dict[str, float] | None, records: list[RequestRecord]
    ) -> AcceptanceCounts | None:
        """Per-request counts when the server streams them, else /metrics deltas; None for neither."""
        finished = sum(r.ok for r in records)
        return acceptance.per_request_counts(records) or acceptance.counter_counts(before, after, finished)

    def request_counts(self, records: list[RequestRecord]) -> AcceptanceCounts | None:
        return acceptance.per_request_counts(records)

    async def server_info(self, http: aiohttp.ClientSession, base_url: str) -> dict[str, Any] | None:
        """/server_info (0.5.9+), else /get_server_info (deprecated since, still served in 0.5.23)."""
        for path in ("/server_info", "/get_server_info"):
            async with http.get(f"{base_url}{path}") as resp:
                if resp.status == 404:
                    continue
                resp.raise_for_status()
                return await resp.json()
        return None
