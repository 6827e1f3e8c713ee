#!/usr/bin/env bash
# A light SGLang environment for checking launch argv offline (no GPU, no model): SGLang's own
# ServerArgs parser and its speculative-algorithm registry, which specexp's preflight and
# `pytest -m sglang` run through engine.python. It cannot serve: it lacks the CUDA kernels.
#
# sglang is installed without its dependencies (its pins pull torch 2.14.1 + CUDA kernels, GBs);
# the list below is what `import sglang.srt.server_args` and `ServerArgs.add_cli_args` need in
# sglang 0.5.23, found by importing until nothing was missing (torch and triton because
# sglang/srt/utils/common.py imports them at module level). torch==2.13.0 resolves to the CPU
# build where one is offered (find-links); override with SPECEXP_TORCH_SPEC.
#
# Idempotent: an existing venv is reused and pip skips what is already satisfied.
# Usage: bash scripts/install_sglang_light.sh   (then engine.python=$SPECEXP_SGLANG_VENV/bin/python)
set -euo pipefail

venv="${SPECEXP_SGLANG_VENV:-.venvs/sglang}"
python="${SPECEXP_SGLANG_BASE_PYTHON:-python3.11}"
sglang_version="${SPECEXP_SGLANG_VERSION:-0.5.23}"
torch_spec="${SPECEXP_TORCH_SPEC:-torch==2.13.0}"

deps=(
  "$torch_spec" triton numpy msgspec pydantic orjson psutil pybase64 requests pillow starlette
  pyzmq tqdm ipython aiohttp packaging
)

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('sglang') != '$sglang_version')" 2>/dev/null; then
  "${pip[@]}" --no-deps "sglang==$sglang_version"
fi
# pip warns that sglang's own requirements are unmet: expected, they are the GPU stack.
"${pip[@]}" "${deps[@]}" 2>&1 | grep -v -e "^sglang .* requires" -e "dependency resolver" -e "^WARNING: Location" || true
"$venv/bin/python" - <<'PY'
import argparse

from sglang.srt.server_args import ServerArgs

parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
ServerArgs.from_cli_args(parser.parse_args(["--model-path", "dummy"]))
print("sglang light venv ok")
PY
