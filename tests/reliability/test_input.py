"""Items 6 and 7 (and issue 26's item 9): input that used to slip through is refused in one line
with exit 2, before anything starts or is written, and leaves no folder behind.

The refusals call the app's entry point in this process (``idle_ws.main``); a few run it as a real
``python -m specexp`` to hold the exit code and the one line end to end."""

import importlib.util
import os
from pathlib import Path

import pytest


def one_line(run) -> str:
    said = (run.stdout + run.stderr).strip().splitlines()
    assert run.returncode == 2, "\n".join(said[-30:])
    assert "Traceback" not in run.stdout + run.stderr
    assert len(said) == 1 and said[0].startswith("invalid configuration: "), "\n".join(said[-30:])
    return said[0]


def left_no_folder(ws) -> None:
    for folder in (ws.outputs / "runs", ws.outputs / "multirun", ws.outputs / "servers"):
        assert not folder.exists() or not list(folder.iterdir()), list(folder.iterdir())
    assert ws.logged() == 0


BAD = {
    "type": (["batch=abc"], "batch: Value 'abc' of type 'str' could not be converted to Integer"),
    "unknown-key": (["nosuch=3"], "nosuch: no such setting"),
    "sweep-type": (["batch=1,abc", "-m"], "batch: Value 'abc' of type 'str' could not be converted to Integer"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_from_a_real_process_is_one_line_and_exit_2(ws, case) -> None:
    """End to end: the interpreter's exit code and all it printed, as a shell sees them."""
    args, expected = BAD[case]
    line = one_line(ws.run("drafter=none", *args, timeout=120))
    assert expected in line, line
    left_no_folder(ws)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["batch=abc"], "batch: Value 'abc' of type 'str' could not be converted to Integer"),
        (["batch=1.5"], "batch: Value '1.5' of type 'float' could not be converted to Integer"),
        (["drafter=eagle"], "drafter: no option 'eagle'. Fix: use one of eagle3_10k, ngram, none, tiny"),
        (["batch=[1,"], "cannot read the override 'batch=[1,'"),
        (["nosuch=3"], "nosuch: no such setting"),
        (["+workload.num_promts=8"], "workload.num_promts: no such setting. Fix: did you mean workload.num_prompts?"),
        (["load=rate", "rate=inf", "load.max_concurrency=4"], "load.rate: inf is no arrival rate"),
        (["batch=1,abc", "-m"], "batch: Value 'abc' of type 'str' could not be converted to Integer"),
        (["batch=1,4"], "invalid configuration: batch=1,4 is a sweep: add -m (python -m specexp "),
        (["batch=range(1,5)"], "batch=range(1,5) is a sweep: add -m (python -m specexp "),
        (["batchh=4"], "batchh: no such setting. Fix: did you mean batch?"),
        (["slo.ttft=500"], "slo.ttft: no such setting. Fix: did you mean slo.ttft_ms?"),
        (["engine.pythn=x"], "engine.pythn: no such setting. Fix: did you mean engine.python?"),
        (["ttft_ms=500"], "ttft_ms: no such setting. Fix: did you mean slo.ttft_ms?"),
        (["batchh=1,4", "-m"], "batchh: no such setting. Fix: did you mean batch?"),
        (["nccl.env.NCCL_ALGO=Ring"], "nccl.env.NCCL_ALGO: no such entry yet. Fix: add it with +nccl.env.NCCL_ALGO="),
    ],
    ids=[
        *("type", "float", "group-option", "syntax", "unknown-key", "undeclared-plus-key", "rate-inf", "sweep-type"),
        *("sweep-without-m", "range-without-m", "near-key", "near-nested-key", "near-engine-key"),
        *("near-key-in-a-group", "near-key-in-a-sweep", "new-dict-entry"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_and_leaves_no_folder(idle_ws, args, expected) -> None:
    line = one_line(idle_ws.main("drafter=none", *args))
    assert expected in line, line
    left_no_folder(idle_ws)


def test_invalid_utf8_in_a_dataset_names_file_and_line_and_leaves_no_run_folder(idle_ws) -> None:
    data = idle_ws.root / "bad.jsonl"
    data.write_bytes(b'{"prompt": "fine"}\n{"prompt": "bad \xff byte"}\n')
    line = one_line(idle_ws.main("drafter=none", "workload=jsonl", f"workload.path={data}"))
    assert f"workload.path: {data}:2: not UTF-8 (byte 0xff at column 17)" in line
    left_no_folder(idle_ws)


def test_a_foreign_folder_is_refused_before_anything_is_written(idle_ws) -> None:
    ws = idle_ws
    before = sorted(os.listdir("/"))
    line = one_line(ws.main("drafter=none", "batch=1,2", "hydra.sweep.dir=/", "-m"))
    assert "hydra.sweep.dir: / holds files specexp did not make" in line
    assert sorted(os.listdir("/")) == before

    project = ws.root / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    line = one_line(ws.main("drafter=none", f"hydra.run.dir={project}"))
    assert f"hydra.run.dir: {project} holds files specexp did not make (notes.txt)" in line
    assert sorted(p.name for p in project.iterdir()) == ["notes.txt"]


def test_a_sweep_folder_specexp_made_is_still_accepted(idle_ws) -> None:
    sweep = idle_ws.root / "sweep"
    first = idle_ws.main("drafter=none", f"hydra.sweep.dir={sweep}", "dry_run=true", "batch=1,2", "-m")
    assert first.returncode == 0, first.stderr[-2000:]
    assert (sweep / "multirun.yaml").exists()
    again = idle_ws.main("drafter=none", f"hydra.sweep.dir={sweep}", "dry_run=true", "batch=1,2", "-m")
    assert again.returncode == 0, again.stderr[-2000:]
    assert Path(sweep).is_dir()


def test_a_batch_the_reference_engine_cannot_hold_is_refused_before_launch_naming_the_limit(idle_ws) -> None:
    line = one_line(idle_ws.main("drafter=none", "batch=10000000"))
    assert "batch: the reference engine's KV cache for 10000000 requests of 32 tokens needs" in line, line
    assert "GiB available. Fix: use a batch (and engine.max_running_requests) of at most" in line
    assert not (idle_ws.outputs / "servers").exists(), "a server was started"


def test_a_dataset_trace_without_a_tokenizer_to_cut_with_is_refused_before_launch(idle_ws) -> None:
    """Issue 36 item 2: a trace's dataset prompts are cut to its lengths by a tokenizer found here."""
    data = idle_ws.root / "prompts.jsonl"
    data.write_text('{"prompt": "a prompt"}\n')
    (idle_ws.root / "no_tokenizer").mkdir()
    trace = Path(__file__).parents[1] / "fixtures" / "traces" / "mooncake.jsonl"
    load = ["load=trace", f"load.path={trace}", "load.max_concurrency=4"]
    workload = ["workload=jsonl", f"workload.path={data}", f"workload.length_tokenizer={idle_ws.root / 'no_tokenizer'}"]
    line = one_line(idle_ws.main("drafter=none", *load, *workload))
    assert "workload.length_tokenizer: " in line and "no tokenizer.json to cut a trace's dataset prompts" in line
    left_no_folder(idle_ws)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="this python has vLLM: nothing to refuse")
def test_vllm_without_its_python_is_refused_before_launch(idle_ws) -> None:
    line = one_line(idle_ws.main("drafter=none", "engine=vllm", "engine.python=null"))
    assert line.startswith("invalid configuration: engine.python: unset, and specexp's own python has no vLLM."), line
    assert "Fix: bash scripts/install_vllm_cpu.sh" in line and "a python with vLLM installed" in line
    left_no_folder(idle_ws)


def test_vllm_cpu_without_its_venv_is_refused_before_launch(idle_ws) -> None:
    missing = idle_ws.root / "absent" / "bin" / "python"
    line = one_line(idle_ws.main("drafter=none", "engine=vllm_cpu", f"engine.python={missing}", "batch=1,2", "-m"))
    assert f"engine.python: no interpreter {missing} on this machine. Fix: bash scripts/install_vllm_cpu.sh" in line
    left_no_folder(idle_ws)


def test_sglang_without_its_python_is_refused_before_launch(idle_ws) -> None:
    line = one_line(idle_ws.main("drafter=none", "engine=sglang", "engine.python=null"))
    assert "engine.python: SGLang is not importable by" in line and "install_sglang_light.sh" in line
    left_no_folder(idle_ws)


@pytest.mark.parametrize(
    ("engine", "server"), [("vllm", "vllm.entrypoints.openai.api_server"), ("sglang", "sglang.launch_server")]
)
def test_a_dry_run_needs_no_engine_python(idle_ws, engine, server) -> None:
    """A dry run starts nothing: the README's commands print their plan on a machine without the engine."""
    run = idle_ws.main("drafter=none", f"engine={engine}", "engine.python=null", "dry_run=true")
    assert run.returncode == 0, run.stderr[-3000:]
    assert f'"{server}"' in run.stdout  # the server's argv, planned and not started


def test_a_sweep_without_m_is_answered_with_the_command_to_run(idle_ws) -> None:
    """The whole command with -m, quoted for the shell, to copy as it stands."""
    line = one_line(idle_ws.main("drafter=none,tiny", "batch=1,4", "engine.extra_args=[--a b]", fast=False))
    command = "python -m specexp drafter=none,tiny batch=1,4 'engine.extra_args=[--a b]' -m"
    assert line == f"invalid configuration: drafter=none,tiny is a sweep: add -m ({command})", line
