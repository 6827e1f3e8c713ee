"""How many requests a launched vLLM or SGLang server will run at once, as the engine's own argument
parser reads the launch argv (in engine.python, no server, no device): argparse keeps a flag's last
copy and takes abbreviations (``--max-running 4``), and vLLM also reads ``--config`` YAML and
``--max_num_seqs``, so a limit in engine.extra_args can override the one specexp sizes from the batch
without any flag matching by name."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

from specexp.engines.sglang.adapter import LAUNCH_MODULE
from specexp.engines.vllm import SERVER_MODULE


@dataclass(frozen=True)
class Limit:
    """A server flag that caps the requests it serves at once: ``dest`` on the parsed namespace,
    and what a request beyond it gets."""

    flag: str
    dest: str
    beyond: str


# vLLM 0.32: vllm/config/scheduler.py (max_num_seqs sizes the runner and admits into RUNNING;
# max_num_active_seqs lowers only the admission; max_num_queued_reqs answers 503 beyond it).
# SGLang 0.5.23: srt/server_args.py max_running_requests.
WAITS = "waits in the server while the client counts it running"
LIMITS = {
    "vllm": (
        Limit("--max-num-seqs", "max_num_seqs", WAITS),
        Limit("--max-num-active-seqs", "max_num_active_seqs", WAITS),
        Limit("--max-num-queued-reqs", "max_num_queued_reqs", "is refused with HTTP 503"),
    ),
    "sglang": (Limit("--max-running-requests", "max_running_requests", WAITS),),
}
MODULES = {"vllm": SERVER_MODULE, "sglang": LAUNCH_MODULE}

# The engine's parser, built as its server builds it (vllm/entrypoints/launchers/cli_args.py
# make_arg_parser; sglang ServerArgs.add_cli_args); stdin: [argv, dests]; one marked JSON line out.
_PARSERS = {
    "vllm": """
from vllm.utils.argparse_utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
parser = make_arg_parser(FlexibleArgumentParser())
""",
    "sglang": """
import argparse
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser(prog="sglang serve")
ServerArgs.add_cli_args(parser)
""",
}
MARK = "SPECEXP_LIMITS "
_READ = f"""
import json, sys
argv, dests = json.load(sys.stdin)
args = parser.parse_args(argv)
print({MARK!r} + json.dumps({{d: getattr(args, d, None) for d in dests}}), flush=True)
"""


def server_limits(engine: str, python: list[str], argv: list[str], env: dict[str, str]) -> dict[Limit, int]:
    """The limits ``argv`` (the whole launch command) sets, as ``engine``'s parser resolves them; empty
    for an engine without such limits, or where the parser cannot run or rejects the argv (the
    engine's preflight names that)."""
    if engine not in LIMITS:
        return {}
    limits = LIMITS[engine]
    args = argv[argv.index(MODULES[engine]) + 1 :]
    try:
        out = subprocess.run(
            [*python, "-c", _PARSERS[engine] + _READ],
            input=json.dumps([args, [lim.dest for lim in limits]]),
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(MARK)]
    if not lines:
        return {}
    values = json.loads(lines[-1].removeprefix(MARK))
    return {lim: values[lim.dest] for lim in limits if isinstance(values.get(lim.dest), int)}
