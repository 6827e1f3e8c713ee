"""Items 6 and 7 (and issue 26's item 9): input that used to slip through is refused in one line
with exit 2, before anything starts or is written, and leaves no folder behind."""

import os
from pathlib import Path

import pytest


def one_line(run) -> str:
    said = (run.stdout + run.stderr).strip().splitlines()
    assert run.returncode == 2, "\n".join(said[-30:])
    assert len(said) == 1 and said[0].startswith("invalid configuration: "), "\n".join(said[-30:])
    return said[0]


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
    ],
    ids=["type", "float", "group-option", "syntax", "unknown-key", "undeclared-plus-key", "rate-inf", "sweep-type"],
)
def test_bad_input_is_one_line_and_exit_2_and_leaves_no_folder(ws, args, expected) -> None:
    line = one_line(ws.run("drafter=none", *args, timeout=120))
    assert expected in line, line
    assert not [p for p in (ws.outputs / "runs").glob("*")] if (ws.outputs / "runs").exists() else True
    assert not (ws.outputs / "multirun").exists() or not list((ws.outputs / "multirun").iterdir())


def test_invalid_utf8_in_a_dataset_names_file_and_line_and_leaves_no_run_folder(ws) -> None:
    data = ws.root / "bad.jsonl"
    data.write_bytes(b'{"prompt": "fine"}\n{"prompt": "bad \xff byte"}\n')
    line = one_line(ws.run("drafter=none", "workload=jsonl", f"workload.path={data}", timeout=120))
    assert f"workload.path: {data}:2: not UTF-8 (byte 0xff at column 17)" in line
    runs = ws.outputs / "runs"
    assert not runs.exists() or not list(runs.iterdir()), list(runs.iterdir())


def test_a_foreign_folder_is_refused_before_anything_is_written(ws) -> None:
    before = sorted(os.listdir("/"))
    line = one_line(ws.run("drafter=none", "batch=1,2", "hydra.sweep.dir=/", "-m", timeout=120))
    assert "hydra.sweep.dir: / holds files specexp did not make" in line
    assert sorted(os.listdir("/")) == before

    project = ws.root / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    line = one_line(ws.run("drafter=none", f"hydra.run.dir={project}", timeout=120))
    assert f"hydra.run.dir: {project} holds files specexp did not make (notes.txt)" in line
    assert sorted(p.name for p in project.iterdir()) == ["notes.txt"]


def test_a_sweep_folder_specexp_made_is_still_accepted(ws) -> None:
    sweep = ws.root / "sweep"
    first = ws.run("drafter=none", f"hydra.sweep.dir={sweep}", "dry_run=true", "batch=1,2", "-m", timeout=120)
    assert first.returncode == 0, first.stderr[-2000:]
    assert (sweep / "multirun.yaml").exists()
    again = ws.run("drafter=none", f"hydra.sweep.dir={sweep}", "dry_run=true", "batch=1,2", "-m", timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    assert Path(sweep).is_dir()


def test_a_batch_the_reference_engine_cannot_hold_is_refused_before_launch_naming_the_limit(ws) -> None:
    line = one_line(ws.run("drafter=none", "batch=10000000", timeout=120))
    assert "batch: the reference engine's KV cache for 10000000 requests of 32 tokens needs" in line, line
    assert "GiB available. Fix: use a batch (and engine.max_running_requests) of at most" in line
    assert not (ws.outputs / "servers").exists(), "a server was started"
