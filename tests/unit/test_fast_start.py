"""A command that starts no server answers without the libraries a run needs: ``--help``, ``--version``
and a refused value never import MLflow, Optuna, torch, SciPy, aiohttp, matplotlib or plotly (each costs
seconds to import; benchmarks/cli_start.py prints the wall times). Hydra imports hydra_plugins on every
start, so the sweeper plugin is on this path too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = {"mlflow", "optuna", "torch", "scipy", "aiohttp", "matplotlib", "plotly"}
IMPORT_LOG = "import time:"


def start(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str], list[str]]:
    """``python -X importtime -m specexp ARGS``: the process, the heavy packages it imported, and the
    lines of stderr that are not the import log."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "specexp", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0] for line in proc.stderr.splitlines() if line.startswith(IMPORT_LOG)
    }
    said = [line for line in proc.stderr.splitlines() if not line.startswith(IMPORT_LOG)]
    return proc, imported & HEAVY, said


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_import_no_heavy_library(tmp_path: Path, flag: str) -> None:
    proc, heavy, _ = start(tmp_path, flag)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip()
    assert not heavy, f"{flag} imported {sorted(heavy)}"


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("batch=0", "batch: 0 < 1. Fix: use a concurrency of 1 or more, e.g. batch=1,4,8,16 -m"),
        ("engine=nope", "engine: no option 'nope'. Fix: use one of external, sglang, torch, vllm, vllm_cpu"),
        ("+workload.num_promts=8", "workload.num_promts: no such setting. Fix: did you mean workload.num_prompts?"),
        ("resume=latest", "resume: only a sweep can be resumed. Fix: add -m (and the sweep's overrides)"),
    ],
)
def test_a_refused_value_imports_no_heavy_library(tmp_path: Path, override: str, line: str) -> None:
    proc, heavy, said = start(tmp_path, override)
    assert proc.returncode == 2
    assert said == [f"invalid configuration: {line}"]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not heavy, f"{override} imported {sorted(heavy)}"


def test_hydras_help_still_lists_the_config_groups(tmp_path: Path) -> None:
    """specexp.help builds Hydra's group lists only for a template that shows them: Hydra's own does."""
    proc = subprocess.run(
        [sys.executable, "-m", "specexp", "--hydra-help"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "hydra/sweeper: basic, specexp" in proc.stdout.splitlines()
