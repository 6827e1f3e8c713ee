"""Issue 36 item 2: a trace replayed with a dataset workload sends the dataset's prompts chosen and cut
to each request's input length (specexp.load.trace_prompts), the same for every arm, and its records
say where a length could not be honoured; without a tokenizer to cut with it is refused, exit 2,
before any server starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from specexp.config import ConfigError, WorkloadConfig
from specexp.config.trace_file import TraceRequest, read_trace
from specexp.load.send_plan import trace_items
from specexp.load.trace_prompts import choose

TRACES = Path(__file__).parents[1] / "fixtures" / "traces"


@pytest.fixture
def one_token_a_byte(tmp_path: Path) -> Path:
    """A byte-level BPE whose one merge is a space and an "a" ("Ġa"): every other byte of an ASCII text
    is one token, so lengths are plain, and a tag's space joins the prompt's first "a" across a cut."""
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE({**vocab, "Ġa": len(vocab)}, [("Ġ", "a")]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    (tmp_path / "tok").mkdir()
    tok.save(str(tmp_path / "tok" / "tokenizer.json"))
    return tmp_path / "tok"


def dataset(tmp_path: Path, lengths: list[int]) -> WorkloadConfig:
    """A JSONL workload whose prompt i is ``lengths[i]`` characters (tokens) of letter i."""
    rows = [{"prompt": chr(ord("a") + i) * n, "category": f"c{i}"} for i, n in enumerate(lengths)]
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return WorkloadConfig(kind="jsonl", path=str(path), input_len=1000, output_len=50, unique=False)


def trace(*lengths: int) -> list[TraceRequest]:
    return [TraceRequest(float(i), n, 7, i + 1) for i, n in enumerate(lengths)]


def test_the_shortest_prompt_long_enough_not_given_yet_then_again_then_the_longest() -> None:
    lengths = [5, 10, 10, 40]
    assert choose(lengths, [8, 8, 8, 8, 3, 50]) == [1, 2, 3, 1, 0, 3]


def test_each_request_gets_a_dataset_prompt_cut_to_its_length(tmp_path: Path, one_token_a_byte: Path) -> None:
    w = dataset(tmp_path, [30, 12, 80, 12])
    items = trace_items(w, trace(10, 12, 25, 60, 200), "sweep/job/window0", str(one_token_a_byte))
    texts = [c.turns[0] for c in items]
    # 10 and 12: the two 12-token prompts (ties in the seeded order); 25: the 30 one; 60 and 200: the 80
    assert sorted(texts[:2]) == ["b" * 10, "d" * 12] or sorted(texts[:2]) == ["b" * 12, "d" * 10]
    assert texts[2:] == ["a" * 25, "c" * 60, "c" * 80]
    assert [c.category for c in items[2:]] == ["c0", "c2", "c2"]
    records = [dict(c.extra) for c in items]
    assert [(r["input_asked"], r["input_sent"]) for r in records] == [(10, 10), (12, 12), (25, 25), (60, 60), (200, 80)]
    assert [r for r in records if r["input_sent"] < r["input_asked"]] == [records[4]]  # flagged: none that long
    assert [c.max_tokens for c in items] == [7] * 5 and records[0]["trace_line"] == 1
    again = trace_items(w, trace(10, 12, 25, 60, 200), "sweep/job/window0", str(one_token_a_byte))
    assert again == items  # every arm sends the same prompts


def test_workload_input_len_caps_it_and_the_tag_is_counted(tmp_path: Path, one_token_a_byte: Path) -> None:
    w = dataset(tmp_path, [100])
    w.input_len, w.unique = 40, True
    (item,) = trace_items(w, trace(70), "sweep/job/window0", str(one_token_a_byte))
    text = str(item.turns[0])
    # "[tag-0] a" is one token fewer than its parts: the cut moved one "a" on to make 40 in all
    assert text.startswith("[") and text.endswith("a") and len(text) == 41
    assert len(Tokenizer.from_file(str(one_token_a_byte / "tokenizer.json")).encode(text).ids) == 40
    assert dict(item.extra)["input_sent"] == 40 and dict(item.extra)["input_asked"] == 70


def test_random_trace_records_say_the_tokens_sent() -> None:
    w = WorkloadConfig(input_len=1024)
    items = trace_items(w, read_trace(str(TRACES / "mooncake.jsonl")), "s")
    assert [dict(c.extra)["input_sent"] for c in items] == [120, 1024, 64, 33, 10]


def test_without_a_tokenizer_to_cut_with_it_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        trace_items(dataset(tmp_path, [10]), trace(5), "s", str(tmp_path))
    assert raised.value.key == "workload.length_tokenizer" and "to cut a trace's dataset prompts" in str(raised.value)
