"""Items per point: random ids unique per stream; dataset items the same at every point (so a speculative
point and its baseline answer the same questions), tagged per point unless unique=false."""

import json

from specexp.config import WorkloadConfig
from specexp.load.prompts import make_prompts


def first_turns(items) -> list:
    return [c.turns[0] for c in items]


def test_random_prompts_have_exact_length_and_range() -> None:
    cfg = WorkloadConfig(input_len=17, token_range=[5, 9])
    prompts = first_turns(make_prompts(cfg, 4, "s/0/0/measured"))
    assert all(len(p) == 17 and all(5 <= t < 9 for t in p) for p in prompts)


def test_streams_never_repeat_a_prompt_and_are_reproducible() -> None:
    cfg = WorkloadConfig()
    a = first_turns(make_prompts(cfg, 8, "s/0/0/measured"))
    b = first_turns(make_prompts(cfg, 8, "s/1/0/measured"))
    assert not {tuple(p) for p in a} & {tuple(p) for p in b}
    assert a == first_turns(make_prompts(cfg, 8, "s/0/0/measured"))


def test_text_prompts_get_a_unique_tag_on_the_same_items(tmp_path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps({"prompt": f"q{i}"}) for i in range(3)) + "\n")
    cfg = WorkloadConfig(kind="jsonl", path=str(path))
    a, b = (first_turns(make_prompts(cfg, 6, f"s/{job}/0/measured")) for job in (0, 1))
    assert len(set(a + b)) == 12
    assert [p.split("] ", 1)[1] for p in a] == [p.split("] ", 1)[1] for p in b]  # same questions, in order
    shared = WorkloadConfig(kind="jsonl", path=str(path), unique=False)
    assert set(first_turns(make_prompts(shared, 6, "x"))) == {"q0", "q1", "q2"}
    assert make_prompts(shared, 6, "s/0/0/measured") == make_prompts(shared, 6, "s/1/0/measured")


def test_warmup_takes_the_items_before_the_measured_ones(tmp_path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps({"prompt": f"q{i}"}) for i in range(10)) + "\n")
    cfg = WorkloadConfig(kind="jsonl", path=str(path), unique=False)
    measured = first_turns(make_prompts(cfg, 4, "s/0/0/measured"))
    warm = first_turns(make_prompts(cfg, 3, "s/0/0/warmup", warmup=True))
    assert not set(warm) & set(measured)
    order = [f"q{i}" for i in range(10)] * 2
    start = order.index(measured[0])
    assert order[start + 10 - 3 : start + 10] == warm and order[start : start + 4] == measured


def test_prompt_format_wraps_every_turn_and_the_tag_goes_first(tmp_path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"turns": ["a", "b"]}) + "\n")
    cfg = WorkloadConfig(kind="mtbench", api="chat", path=str(path), prompt_format="Q: {prompt}")
    (item,) = make_prompts(cfg, 1, "s/0/0/measured")
    assert item.turns[0].startswith("[") and item.turns[0].endswith("] Q: a") and item.turns[1] == "Q: b"


def test_builtin_prompts_are_text() -> None:
    prompts = first_turns(make_prompts(WorkloadConfig(kind="builtin"), 20, "s/0/0/warmup"))
    assert len(set(prompts)) == 20 and all(isinstance(p, str) for p in prompts)
