"""Item 9: a bad path or a schema picked as an option fails before any server starts, in one line
that names the key, the file and (for a JSONL workload) the line; exit 2. The app's entry point runs
in this process (``idle_ws.main``); tests/reliability/test_input.py runs a few refusals as real processes."""

import pytest


def assert_refused(ws, run, *words: str) -> None:
    assert run.returncode == 2, run.stderr[-3000:]
    for word in words:
        assert word in run.stderr, (word, run.stderr[-3000:])
    assert "Traceback" not in run.stdout + run.stderr
    assert not (ws.outputs / "servers").exists()  # no server was started
    assert ws.logged() == 0


@pytest.mark.parametrize("mode", ["single", "sweep"])
def test_a_model_folder_without_config_json(idle_ws, mode) -> None:
    folder = idle_ws.root / "not-a-model"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"\0")
    run = idle_ws.main("drafter=none", f"model.path={folder}", *(["batch=1,2", "-m"] if mode == "sweep" else []))
    assert_refused(idle_ws, run, "model.path", str(folder / "config.json"), "Fix:")


def test_a_missing_local_model_folder(idle_ws) -> None:
    run = idle_ws.main("drafter=none", f"model.path={idle_ws.root / 'absent'}")
    assert_refused(idle_ws, run, "model.path", str(idle_ws.root / "absent"))


def test_a_missing_workload_file(idle_ws) -> None:
    path = idle_ws.root / "absent.jsonl"
    run = idle_ws.main("drafter=none", "workload=jsonl", f"workload.path={path}")
    assert_refused(idle_ws, run, "workload.path", str(path), "Fix:")


def test_a_malformed_jsonl_line_is_named_by_file_and_line(idle_ws) -> None:
    path = idle_ws.root / "prompts.jsonl"
    path.write_text('{"prompt": "one"}\n\n{"prompt": "two"}\n{"prompt": "three"\n{"prompt": "four"}\n')
    run = idle_ws.main("drafter=none", "workload=jsonl", f"workload.path={path}", "batch=1,2", "-m")
    assert_refused(idle_ws, run, "workload.path", f"{path}:4", "Fix:")


def test_a_line_without_a_prompt_is_named_by_file_and_line(idle_ws) -> None:
    path = idle_ws.root / "prompts.jsonl"
    path.write_text('{"prompt": "one"}\n{"answer": "two"}\n')
    run = idle_ws.main("drafter=none", "workload=jsonl", f"workload.path={path}")
    assert_refused(idle_ws, run, "workload.path", f"{path}:2")


@pytest.mark.parametrize("choice", ["drafter=drafter_schema", "engine=torch_schema", "workload=workload_schema"])
def test_a_schema_is_not_an_option(idle_ws, choice) -> None:
    run = idle_ws.main(choice)
    assert_refused(idle_ws, run, "no option", "Fix: use one of")
    assert "_schema" not in run.stderr.split("use one of")[-1]  # not offered either


@pytest.mark.parametrize("mode", ["single", "sweep"])
def test_a_prompt_longer_than_the_context_is_named_by_file_and_line(idle_ws, mode) -> None:
    """Issue 37 item 4: a 20 MB prompt launched a server that stalled in warm-up; now one of 5 MB is refused
    before launch, from its characters alone (the tiny model's context is 2048 tokens)."""
    path = idle_ws.root / "prompts.jsonl"
    path.write_text('{"prompt": "one"}\n{"prompt": "' + "word " * 1_000_000 + '"}\n')
    sweep = ["batch=1,2", "-m"] if mode == "sweep" else []
    run = idle_ws.main("drafter=none", "workload=jsonl", f"workload.path={path}", "workload.output_len=32", *sweep)
    assert_refused(idle_ws, run, "workload.path", f"{path}:2", "at least", "output_len 32", "context length 2048")
    assert "model.max_model_len" in run.stderr
    assert len([line for line in run.lines if "workload.path" in line]) == 1


def test_random_prompts_longer_than_the_context_name_input_len(idle_ws) -> None:
    run = idle_ws.main("drafter=none", "workload.input_len=2040", "workload.output_len=16")
    assert_refused(idle_ws, run, "workload.input_len", "2040 tokens", "output_len 16", "context length 2048")
