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

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any

import aiohttp

from specexp.config import Config, ConfigError, EngineConfig
from specexp.engines import counters
from specexp.engines.base import Command, Engine
from specexp.load.records import RequestRecord

LAUNCH_MODULE = "sglang.launch_server"
# The version scripts/install_sglang_light.sh installs; rules for an unknown install assume it.
PINNED_VERSION = "0.5.23"
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
    }
)

# Per-request fields of sglext.spec_tokens_details kept in RequestRecord.extra.
SPEC_FIELDS = ("spec_verify_ct", "spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_accept_length")
# /metrics counters (names without "sglang:" and "_total") behind the counter fallback.
GENERATION_TOKENS = "generation_tokens"
VERIFY_CALLS = "spec_verify_calls"

Release = tuple[int, int, int]


def release(version: str) -> Release:
    """(major, minor, patch) of a version string; post/dev/local suffixes do not move a rule."""
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"not an SGLang version: {version!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def cuda_graph_flag(rel: Release) -> str:
    """The decode CUDA-graph batch limit flag.

    ``--cuda-graph-max-bs-decode`` appeared in 0.5.14 (``--cuda-graph-max-bs`` became its deprecated
    alias); 0.5.20 dropped the alias, and argparse then rejects ``--cuda-graph-max-bs`` as an
    ambiguous prefix of the -decode/-prefill pair (srt/arg_groups/fields/exec_.py).
    """
    return "--cuda-graph-max-bs-decode" if rel >= (0, 5, 14) else "--cuda-graph-max-bs"


def acceptance_source(rel: Release) -> str:
    """Where acceptance comes from for this version (see the module docstring)."""
    if rel >= (0, 5, 19):
        return "sglext"
    return "metrics" if rel >= (0, 5, 13) else "none"


def overwritten_env(rel: Release, env: dict[str, str], args: list[str]) -> dict[str, str]:
    """Variables of ``env`` that SGLang replaces at startup, with the value it sets.

    srt/entrypoints/engine.py ``_set_envs_and_config``: before 0.5.5 NCCL_CUMEM_ENABLE and
    NCCL_NVLS_ENABLE are always overwritten (0 unless --enable-symm-mem / --enable-nccl-nvls);
    from 0.5.5 a value set by the user is kept unless one of those flags asks for 1.
    CUDA_DEVICE_MAX_CONNECTIONS is always forced: 4 before 0.5.5, 8 since.
    """
    symm_mem = "--enable-symm-mem" in args
    nvls = "--enable-nccl-nvls" in args or symm_mem
    forced = {"CUDA_DEVICE_MAX_CONNECTIONS": "8" if rel >= (0, 5, 5) else "4"}
    if rel < (0, 5, 5) or symm_mem:
        forced["NCCL_CUMEM_ENABLE"] = str(int(symm_mem))
    if rel < (0, 5, 5) or nvls:
        forced["NCCL_NVLS_ENABLE"] = str(int(nvls))
    return {key: value for key, value in forced.items() if key in env and env[key] != value}


def overlap_scheduled(rel: Release, cfg: Config, env: dict[str, str]) -> bool:
    """Whether the overlap scheduler runs.

    Under speculation, 0.5.x before 0.5.13 turns it off unless SGLANG_ENABLE_SPEC_V2 is true
    (srt/server_args.py; that variable exists from 0.5.5 and defaults to true from 0.5.13); 0.5.17
    dropped it and always uses the v2 worker (srt/arg_groups/speculative_hook.py).
    """
    if cfg.engine.disable_overlap_schedule:
        return False
    if not cfg.drafter.speculative or rel >= (0, 5, 13):
        return True
    return rel >= (0, 5, 5) and env.get("SGLANG_ENABLE_SPEC_V2", "").lower() in ("1", "true")


# Runs in engine.python, without importing sglang (no torch, a fraction of a second): the installed
# version, and the files under sglang/srt that read --num-continuous-decode-steps other than where it
# is declared. The multi-step decode loop left srt/managers/scheduler.py in 0.3.6 (0.3.5 reads it
# there); from then to 0.5.23 the flag is declared and parsed, and read nowhere.
_PROBE = r"""
import importlib.metadata, importlib.util, json, pathlib
declared = ("srt/server_args.py", "srt/arg_groups/field_order.py", "srt/arg_groups/fields/")
try:
    version = importlib.metadata.version("sglang")
    spec = importlib.util.find_spec("sglang")
except (importlib.metadata.PackageNotFoundError, ImportError):
    version = spec = None
readers = []
if version and spec and spec.submodule_search_locations:
    root = pathlib.Path(list(spec.submodule_search_locations)[0])
    for path in sorted((root / "srt").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if not rel.startswith(declared) and "num_continuous_decode_steps" in path.read_text(errors="ignore"):
            readers.append(rel)
print(json.dumps({"version": version, "decode_steps_readers": readers}))
"""

# Runs in engine.python with sglang importable: SGLang's own parser over each argv (stdin: a JSON
# list of argv lists), then what it validates without a GPU or the checkpoint. ServerArgs is built
# only where construction does not resolve (resolve_once, 0.5.19+): before that __post_init__
# loads the model config and queries the GPU. Algorithm names are checked against SGLang's registry
# (0.5.13+ dropped argparse choices for it); NEXTN is an alias resolved before lookup.
_CHECK = r"""
import argparse, contextlib, io, json, sys
from sglang.srt.server_args import ServerArgs

parser = argparse.ArgumentParser(prog="sglang serve")
ServerArgs.add_cli_args(parser)

def check(argv):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        return lines[-1] if lines else "rejected by SGLang's argument parser"
    try:
        if hasattr(ServerArgs, "resolve_once"):
            ServerArgs.from_cli_args(args)
        algorithm = args.speculative_algorithm
        if algorithm and algorithm.upper() != "NEXTN":
            from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
            SpeculativeAlgorithm.from_string(algorithm)
    except (KeyError, ValueError, TypeError, AssertionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None

print("SPECEXP_CHECK " + json.dumps([check(argv) for argv in json.load(sys.stdin)]))
"""


@dataclass(frozen=True)
class Installed:
    """What the probe found in engine.python's environment."""

    version: str
    decode_steps_readers: tuple[str, ...]

    @property
    def release(self) -> Release:
        return release(self.version)


@functools.cache
def probe(python: tuple[str, ...]) -> Installed | None:
    """The SGLang installed for ``python`` (launcher prefix included); None when there is none."""
    try:
        out = subprocess.run([*python, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    data = json.loads(out.stdout.strip().splitlines()[-1])
    if data["version"] is None:
        return None
    return Installed(data["version"], tuple(data["decode_steps_readers"]))


def check_argv(python: list[str], argvs: list[list[str]], env: dict[str, str] | None = None) -> list[str | None]:
    """SGLang's verdict on each server argv (flags after ``-m sglang.launch_server``): None when
    accepted, else SGLang's message. One interpreter start for all of them (the import takes seconds)."""
    out = subprocess.run(
        [*python, "-c", _CHECK],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("SPECEXP_CHECK ")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr or out.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"SGLang's argument check could not run with {python}: " + " | ".join(tail))
    return json.loads(lines[-1].removeprefix("SPECEXP_CHECK "))


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

    def check(self, cfg: Config) -> None:
        d = cfg.drafter
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

    def server_args(self, cfg: Config, port: int) -> list[str]:
        """Flags after ``-m sglang.launch_server``."""
        e: SglangEngineConfig = cfg.engine
        m = cfg.model
        capacity = cfg.capacity
        args = [
            "--model-path", m.path,
            "--served-model-name", m.api_name,
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
        return args

    def command(self, cfg: Config, port: int) -> Command:
        return Command([*self.python(cfg), "-m", LAUNCH_MODULE, *self.server_args(cfg, port)], self.server_env(cfg))

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
        # Older servers ignore the unknown field (pydantic's default extra="ignore" on CompletionRequest).
        return {"return_spec_tokens_details": True} if cfg.drafter.speculative else {}

    def observe(self, event: dict[str, Any], record: RequestRecord) -> None:
        # n=1 per request, so spec_tokens_details is one object (a list only for n>1).
        details = (event.get("sglext") or {}).get("spec_tokens_details")
        if isinstance(details, dict):
            record.extra.update({key: details[key] for key in SPEC_FIELDS if key in details})

    async def read_counters(self, http: aiohttp.ClientSession, base_url: str) -> dict[str, float] | None:
        try:
            found = await counters.scrape(http, f"{base_url}{self.metrics_path}", "sglang:")
        except aiohttp.ClientResponseError:  # 404 without --enable-metrics
            return None
        return {key: found[key] for key in (GENERATION_TOKENS, VERIFY_CALLS) if key in found}

    def acceptance(
        self, before: dict[str, float] | None, after: dict[str, float] | None, records: list[RequestRecord]
    ) -> dict[str, float]:
        """Σcompletion_tokens / Σspec_verify_ct over the measured requests that report it, else the
        same ratio from /metrics counter deltas; {} when neither exists (no speculation, old SGLang)."""
        measured = [r for r in records if r.ok and not r.warmup and r.extra.get("spec_verify_ct")]
        if measured:
            steps = sum(r.extra["spec_verify_ct"] for r in measured)
            out = {"spec_verify_steps": float(steps), "accept_length": sum(r.output_tokens for r in measured) / steps}
            if all("spec_num_proposed_drafts" in r.extra for r in measured):
                proposed = sum(r.extra["spec_num_proposed_drafts"] for r in measured)
                accepted = sum(r.extra.get("spec_num_correct_drafts", 0) for r in measured)
                out.update(spec_draft_tokens=float(proposed), spec_accepted_tokens=float(accepted))
                if proposed:
                    out["accept_rate"] = accepted / proposed
            return out
        if before is None or after is None:
            return {}
        d = counters.delta(before, after)
        steps = d.get(VERIFY_CALLS, 0.0)
        if steps <= 0:
            return {}
        return {"spec_verify_steps": steps, "accept_length": d.get(GENERATION_TOKENS, 0.0) / steps}

    async def server_info(self, http: aiohttp.ClientSession, base_url: str) -> dict[str, Any] | None:
        """/server_info (0.5.9+), else /get_server_info (deprecated since, still served in 0.5.23)."""
        for path in ("/server_info", "/get_server_info"):
            async with http.get(f"{base_url}{path}") as resp:
                if resp.status == 404:
                    continue
                resp.raise_for_status()
                return await resp.json()
        return None
