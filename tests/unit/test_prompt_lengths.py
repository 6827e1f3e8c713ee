"""Issue 37 item 4: prompt lengths checked against the server's context length before it starts. The
rule (specexp.load.lengths), its cheap bound from characters, where the context length comes from
(specexp.engines.context_length) and the workload's check (specexp.load.prompts.check_lengths)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from specexp.config import ConfigError, WorkloadConfig
from specexp.engines.context_length import context_length, human_int, model_context
from specexp.load.lengths import Context, TokenCounter, check_fits, overflow
from specexp.load.prompts import check_lengths, make_prompts

CONTEXT = Context(100, "--max-model-len 100", "model.max_model_len")
REACH = (4, 1)  # a point sends 4 items a phase, 1 in warm-up


@pytest.fixture
def tokenizer(shared_outputs: Path) -> Path:
    return shared_outputs / "models" / "tiny" / "target"


def test_a_request_fits_up_to_the_context_length_and_not_one_token_beyond() -> None:
    assert overflow(90, 10, 100) == 0
    assert overflow(91, 10, 100) == 1
    check_fits("workload.path", "f.jsonl:3", (90, True), 10, CONTEXT)
    with pytest.raises(ConfigError) as caught:
        check_fits("workload.path", "f.jsonl:3", (91, True), 10, CONTEXT)
    text = str(caught.value)
    assert text.startswith("workload.path: f.jsonl:3: the prompt is 91 tokens")
    for part in ("output_len 10", "context length 100 (--max-model-len 100)", "raise model.max_model_len", "drop"):
        assert part in text
    assert "\n" not in text


def test_a_lower_bound_is_said_to_be_one() -> None:
    with pytest.raises(ConfigError, match=r"is at least 500 tokens"):
        check_fits("workload.path", "f.jsonl:1", (500, False), 10, CONTEXT)


def test_the_bounds_from_characters_hold_the_count(tokenizer: Path) -> None:
    counter = TokenCounter(tokenizer / "tokenizer.json")
    assert counter.chars_per_token  # byte-level BPE: the bounds apply
    texts = ["hello world", "é" * 50, "日本語のテキスト" * 10, " " * 300, "a" * 1000, "\n\t x" * 200, "🙂" * 40]
    texts += ["<unk>" * 20, "".join(map(chr, range(32, 3000))), ""]
    for text in texts:
        least, most = counter.bounds(text)
        assert most is not None and least <= counter.count(text) <= most, text


def test_the_bounds_hold_for_a_byte_fallback_tokenizer(tmp_path: Path) -> None:
    """SentencePiece-style (Llama, Mistral): a space becomes "▁" (3 bytes), unknown characters fall
    back to one token per byte."""
    vocab = {f"<0x{i:02X}>": i for i in range(256)} | {"▁": 256, "a": 257, "▁a": 258}
    tok = Tokenizer(models.BPE(vocab, [("▁", "a")], byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.save(str(tmp_path / "tokenizer.json"))
    counter = TokenCounter(tmp_path / "tokenizer.json")
    assert counter.chars_per_token == 6  # "<0x41>"
    for text in ["a a a", " é 日本 ", "é" * 10, "    ", "xyz", "", "🙂 a" * 30]:
        least, most = counter.bounds(text)
        assert most is not None and least <= counter.count(text) <= most, text


def test_a_prompt_is_counted_only_where_its_bounds_do_not_settle_it(tokenizer: Path) -> None:
    counter = TokenCounter(tokenizer / "tokenizer.json")
    tokens, exact = counter.tokens(["word " * 4_000_000], budget=2000)  # 20 MB: over from its characters
    assert not exact and tokens > 2000
    tokens, exact = counter.tokens(["word " * 10, "more"], budget=2000)  # within: at most 3 per byte + 3
    assert not exact and counter.count("word " * 10) + counter.count("more") <= tokens <= 2000
    texts = ["word " * 100, "more"]
    assert counter.tokens(texts, budget=300) == (counter.count(texts[0]) + counter.count(texts[1]), True)


def test_no_bound_where_a_tokenizer_may_drop_or_swallow_text(tmp_path: Path) -> None:
    """WordPiece turns a whole unknown word into one token, and a whitespace pre-tokenizer drops the
    spaces: characters prove nothing there, so every prompt is counted."""
    tok = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    counter = TokenCounter(tmp_path / "tokenizer.json")
    assert counter.chars_per_token is None
    assert counter.bounds("x" * 5000) == (0, None)
    assert counter.tokens(["x" * 5000], budget=10) == (1, True)


def test_the_context_length_is_the_last_flag_else_the_models_config(make_config, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 4096}))
    cfg = make_config("engine=torch", f"model.path={model}")
    found = context_length(cfg, ["python", "--max-model-len", "512", "--max-model-len=1024"])
    assert found == Context(1024, "--max-model-len 1024", "model.max_model_len")
    found = context_length(cfg, ["python", "--port", "1"])
    assert found == Context(4096, f"max_position_embeddings in {model / 'config.json'}", "model.max_model_len")
    sglang = make_config("engine=sglang", f"model.path={model}")
    assert context_length(sglang, ["x", "--context-length", "2k"]).length == 2000  # type: ignore[union-attr]
    extra = make_config("engine=vllm", f"model.path={model}", "engine.extra_args=['--max-model-len=300']")
    found = context_length(extra, ["x", "--max-model-len", "2k", "--max-model-len=300"])
    assert found == Context(300, "--max-model-len 300", "engine.extra_args")  # its copy wins


def test_no_context_length_for_a_hub_model_or_an_endpoint_not_launched(make_config) -> None:
    cfg = make_config("engine=torch", "model.path=someone/some-model")
    assert "no local config.json" in context_length(cfg, ["python"])  # type: ignore[operator]
    assert "does not launch" in context_length(cfg, None)  # type: ignore[operator]


def test_config_lengths_as_the_engines_derive_them() -> None:
    assert model_context({"text_config": {"max_position_embeddings": 8192}}, scaled=True) == 8192
    yarn = {"max_position_embeddings": 32768, "rope_scaling": {"type": "yarn", "factor": 4.0}}
    assert model_context(yarn, scaled=True) == 131072
    assert model_context(yarn, scaled=False) == 32768  # the reference engine: exactly the config's
    llama3 = {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    assert model_context(llama3, scaled=True) == 131072
    assert model_context({}, scaled=True) is None
    assert (human_int("4096"), human_int("4k"), human_int("4K"), human_int("x")) == (4096, 4000, 4096, None)


def _jsonl(tmp_path: Path, *rows: dict) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_long_dataset_line_is_named(tmp_path: Path, tokenizer: Path) -> None:
    path = _jsonl(tmp_path, {"prompt": "short"}, {"prompt": "many words " * 200})
    cfg = WorkloadConfig(kind="jsonl", path=str(path), output_len=10)
    with pytest.raises(ConfigError, match=rf"workload.path: {path}:2: the prompt is \d+ tokens"):
        check_lengths(cfg, CONTEXT, str(tokenizer), REACH)
    check_lengths(cfg, Context(100_000, "x", "y"), str(tokenizer), REACH)


def test_only_the_rows_a_point_sends_are_checked(tmp_path: Path, tokenizer: Path) -> None:
    """ShareGPT holds a prompt of 284k tokens that no point of a small sweep ever sends."""
    path = _jsonl(tmp_path, *({"prompt": f"row {i}"} for i in range(20)))
    cfg = WorkloadConfig(kind="jsonl", path=str(path), unique=False, output_len=10)
    sent = {c.turns[0] for c in [*make_prompts(cfg, 4, "s"), *make_prompts(cfg, 1, "s", warmup=True)]}
    unsent = next(i for i in range(20) if f"row {i}" not in sent)
    rows = [{"prompt": "many words " * 200 if i == unsent else f"row {i}"} for i in range(20)]
    path = _jsonl(tmp_path, *rows)
    cfg = WorkloadConfig(kind="jsonl", path=str(path), unique=False, output_len=10)
    check_lengths(cfg, CONTEXT, str(tokenizer), REACH)
    with pytest.raises(ConfigError, match=f"{path}:{unsent + 1}:"):
        check_lengths(cfg, CONTEXT, str(tokenizer), (20, 1))


def test_later_turns_count_the_answers_before_them(tmp_path: Path, tokenizer: Path) -> None:
    """Two turns of a few tokens each with ignore_eos: the second request carries the first answer."""
    path = _jsonl(tmp_path, {"turns": ["hi", "again"]})
    fixed = WorkloadConfig(kind="jsonl", api="chat", path=str(path), output_len=50)
    with pytest.raises(ConfigError, match=f"{path}:1"):
        check_lengths(fixed, CONTEXT, str(tokenizer), REACH)
    check_lengths(WorkloadConfig(**{**fixed.__dict__, "ignore_eos": False}), CONTEXT, str(tokenizer), REACH)


def test_random_prompts_are_checked_by_their_setting() -> None:
    with pytest.raises(ConfigError, match=r"workload\.input_len: random prompts: the prompt is 95 tokens"):
        check_lengths(WorkloadConfig(input_len=95, output_len=10), CONTEXT, None, REACH)
    check_lengths(WorkloadConfig(input_len=90, output_len=10), CONTEXT, None, REACH)


def test_an_unknown_length_is_said_once_and_not_checked(tmp_path: Path, caplog) -> None:
    path = _jsonl(tmp_path, {"prompt": "many words " * 200})
    cfg = WorkloadConfig(kind="jsonl", path=str(path))
    with caplog.at_level(logging.INFO, logger="specexp"):
        for _ in range(2):
            check_lengths(cfg, CONTEXT, "someone/hub-model-without-files", REACH)
            check_lengths(cfg, "engine=external: not launched", None, REACH)
    said = [r.getMessage() for r in caplog.records if "not checked" in r.getMessage()]
    assert len(said) == 2, said
