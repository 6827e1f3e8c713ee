"""Every dataset reader on a small file the test writes (HumanEval from its package); a missing or
malformed file is a ConfigError naming the key, the file and the line."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from specexp.config import ConfigError, WorkloadConfig
from specexp.load.conversation import Conversation
from specexp.load.datasets import conversations, located


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


SHAREGPT = [
    {
        "id": "a",
        "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": "What is a heap?"},
            {"from": "gpt", "value": "A tree with an order."},
            {"from": "human", "value": "And a stack?"},
            {"from": "gpt", "value": "Last in, first out."},
        ],
    },
    {"id": "empty", "conversations": []},  # ShareGPT has these: left out
    {"id": "no-human", "conversations": [{"from": "gpt", "value": "Hello!"}]},  # left out too
    {"id": "b", "conversations": [{"from": "human", "value": "Name a prime."}, {"from": "gpt", "value": "7"}]},
]
MTBENCH = [
    {"question_id": 81, "category": "writing", "turns": ["Write a haiku.", "Now make it rhyme."]},
    {"question_id": 111, "category": "math", "turns": ["What is 2+2?", "And times 3?"]},
]


@pytest.mark.parametrize("layout", ["json", "jsonl"])
def test_sharegpt_reads_user_turns_and_the_system_message(tmp_path: Path, layout: str) -> None:
    path = tmp_path / f"sg.{layout}"
    if layout == "json":
        path.write_text(json.dumps(SHAREGPT, indent=1))
    else:
        write_jsonl(path, SHAREGPT)
    found = conversations(WorkloadConfig(kind="sharegpt", api="chat", path=str(path)))
    assert found == (
        Conversation(("What is a heap?", "And a stack?"), system="Be brief."),
        Conversation(("Name a prime.",)),
    )
    first_turns = conversations(WorkloadConfig(kind="sharegpt", api="completions", turns=1, path=str(path)))
    assert [c.turns for c in first_turns] == [("What is a heap?",), ("Name a prime.",)]


def test_each_conversation_is_located_by_its_line_or_item(tmp_path: Path) -> None:
    """What a length refusal names: the file's line (blank lines counted) or item (ShareGPT's left-out
    rows counted), the built-in prompt."""
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"prompt": "a"}\n\n{"prompt": "b"}\n')
    assert [w for w, _ in located(WorkloadConfig(kind="jsonl", path=str(jsonl)))] == [f"{jsonl}:1", f"{jsonl}:3"]
    sharegpt = tmp_path / "sg.json"
    sharegpt.write_text(json.dumps(SHAREGPT))
    found = located(WorkloadConfig(kind="sharegpt", api="chat", path=str(sharegpt)))
    assert [w for w, _ in found] == [f"{sharegpt} item 0", f"{sharegpt} item 3"]
    assert tuple(c for _, c in found) == conversations(WorkloadConfig(kind="sharegpt", api="chat", path=str(sharegpt)))
    assert located(WorkloadConfig(kind="builtin"))[2][0] == "builtin prompt 2"


def test_mtbench_reads_turns_and_categories(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "question.jsonl", MTBENCH)
    found = conversations(WorkloadConfig(kind="mtbench", api="chat", path=str(path)))
    assert found == (
        Conversation(("Write a haiku.", "Now make it rhyme."), category="writing"),
        Conversation(("What is 2+2?", "And times 3?"), category="math"),
    )


def test_jsonl_takes_prompts_messages_and_turns(tmp_path: Path) -> None:
    rows = [
        {"prompt": "p1", "category": "qa"},
        {"text": "p2"},
        {"messages": [{"role": "user", "content": "m1"}, {"role": "assistant", "content": "x"}]},
        {"turns": ["t1", "t2"], "task": "rag"},
    ]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    found = conversations(WorkloadConfig(kind="jsonl", api="chat", path=str(path), category_column="task"))
    assert [(c.turns, c.category) for c in found] == [
        (("p1",), None),
        (("p2",), None),
        (("m1",), None),
        (("t1", "t2"), "rag"),
    ]


def test_a_saved_hugging_face_dataset_with_named_columns(tmp_path: Path) -> None:
    rows = {
        "question": ["Translate 'cat' to French.", "Summarise: the sky is blue."],
        "task": ["translation", "summarization"],
        "chat": [[{"role": "user", "content": "hi"}], [{"role": "user", "content": "yo"}]],
    }
    datasets.DatasetDict({"test": datasets.Dataset.from_dict(rows)}).save_to_disk(str(tmp_path / "saved"))
    cfg = WorkloadConfig(kind="hf", api="chat", path=str(tmp_path / "saved"), split="test", column="question")
    found = conversations(WorkloadConfig(**{**cfg.__dict__, "category_column": "task"}))
    assert [(c.turns, c.category) for c in found] == [
        (("Translate 'cat' to French.",), "translation"),
        (("Summarise: the sky is blue.",), "summarization"),
    ]
    messages = conversations(WorkloadConfig(**{**cfg.__dict__, "column": "chat"}))
    assert [c.turns for c in messages] == [("hi",), ("yo",)]
    with pytest.raises(ConfigError, match="no split 'train'") as err:
        conversations(WorkloadConfig(**{**cfg.__dict__, "split": "train"}))
    assert err.value.key == "workload.split"
    with pytest.raises(ConfigError, match="no column 'nope'"):
        conversations(WorkloadConfig(**{**cfg.__dict__, "column": "nope"}))


def test_a_hugging_face_data_file_and_an_uncached_hub_id(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", [{"prompt": "a"}, {"prompt": "b"}])
    assert len(conversations(WorkloadConfig(kind="hf", path=str(path)))) == 2
    with pytest.raises(ConfigError, match="cannot be read offline") as err:
        conversations(WorkloadConfig(kind="hf", dataset="specexp-tests/not-in-any-cache"))
    assert err.value.key == "workload.dataset"


def test_humaneval_comes_from_the_package() -> None:
    found = conversations(WorkloadConfig(kind="humaneval", api="chat"))
    assert len(found) == 164
    assert found[0].turns[0].startswith("from typing import List") and "def has_close_elements" in found[0].turns[0]


@pytest.mark.parametrize(
    ("kind", "lines", "problem"),
    [
        ("jsonl", ['{"prompt": "ok"}', "{not json"], ":2: not JSON"),
        ("jsonl", ['{"prompt": "ok"}', '{"answer": 1}'], ":2: none of the fields"),
        ("jsonl", ['{"messages": [{"role": "user"}]}'], ":1: message 0 needs string role/content"),
        ("mtbench", ['{"turns": ["a"]}', '{"question_id": 2}'], ":2: no 'turns' list"),
        ("sharegpt", ['{"conversations": [{"from": "human", "value": "a"}]}', '{"id": 3}'], ":2: no 'conversations'"),
    ],
)
def test_a_malformed_file_names_the_key_file_and_line(
    tmp_path: Path, kind: str, lines: list[str], problem: str
) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as err:
        conversations(WorkloadConfig(kind=kind, api="chat", path=str(path)))
    assert err.value.key == "workload.path"
    assert f"{path}{problem}" in str(err.value)


def test_a_missing_file_fails_in_the_config() -> None:
    with pytest.raises(ConfigError, match="is not a file") as err:
        WorkloadConfig(kind="mtbench", api="chat", path="/nonexistent/question.jsonl")
    assert err.value.key == "workload.path"


def test_completions_refuse_conversations_that_need_their_history(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "question.jsonl", MTBENCH)
    with pytest.raises(ConfigError, match="up to 2 user turns") as err:
        conversations(WorkloadConfig(kind="mtbench", api="completions", path=str(path)))
    assert err.value.key == "workload.api"


def test_an_edited_file_is_read_again(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "one"}])
    assert len(conversations(WorkloadConfig(kind="jsonl", path=str(path)))) == 1
    write_jsonl(path, [{"prompt": "one"}, {"prompt": "two"}])
    assert len(conversations(WorkloadConfig(kind="jsonl", path=str(path)))) == 2
