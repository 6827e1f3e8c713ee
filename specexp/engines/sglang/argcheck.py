"""SGLang's own parser over specexp's launch argv, run in engine.python (no GPU, no checkpoint)."""

from __future__ import annotations

import json
import subprocess

# Runs in engine.python with sglang importable: SGLang's own parser over each argv (stdin: a JSON
# list of argv lists), then what it validates without a GPU or the checkpoint. ServerArgs is built
# only where construction does not resolve (resolve_once, 0.5.19+): before that __post_init__
# loads the model config and queries the GPU. Algorithm names are checked against SGLang's registry
# (0.5.13+ dropped argparse choices for it); NEXTN is an alias resolved before lookup. An adaptive config
# (--speculative-adaptive) goes through SGLang's own loader, and its depths must include
# --speculative-num-steps, as ServerArgs resolution demands (arg_groups/speculative_hook.py, 0.5.23).
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
        if getattr(args, "speculative_adaptive", False):
            from sglang.srt.speculative.adaptive_spec_params import resolve_candidate_steps_from_config
            steps = resolve_candidate_steps_from_config(args.speculative_adaptive_config)
            if args.speculative_num_steps is not None and args.speculative_num_steps not in steps:
                raise ValueError(f"--speculative-num-steps={args.speculative_num_steps} is not in the "
                                 f"adaptive config candidate_steps {steps}")
    except (KeyError, ValueError, TypeError, AssertionError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None

print("SPECEXP_CHECK " + json.dumps([check(argv) for argv in json.load(sys.stdin)]))
"""


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
