"""What changes across SGLang versions, each rule with the version and file it comes from (wheels
0.3.5 … 0.5.23 were read), and the probe that reads the installed version without importing SGLang."""

from __future__ import annotations

import functools
import json
import re
import subprocess
from dataclasses import dataclass

from specexp.config import Config

# The version scripts/install_sglang_light.sh installs; rules for an unknown install assume it.
PINNED_VERSION = "0.5.23"
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
