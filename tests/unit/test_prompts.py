"""Prompts are unique per point unless the workload says otherwise, and reproducible per stream."""

import json

from specexp.config import WorkloadConfig
from specexp.load.prompts import make_prompts


def test_random_prompts_have_exact_length_and_range() -> None:
    cfg = WorkloadConfig(input_len=17, token_range=[5, 9])
    prompts = make_prompts(cfg, 4, "s/0/0/measured")
    assert all(len(p) == 17 and all(5 <= t < 9 for t in p) for p in prompts)


def test_streams_never_repeat_a_prompt_and_are_reproducible() -> None:
    cfg = WorkloadConfig()
    a = make_prompts(cfg, 8, "s/0/0/measured")
    b = make_prompts(cfg, 8, "s/1/0/measured")
    assert not {tuple(p) for p in a} & {tuple(p) for p in b}
    assert a == make_prompts(cfg, 8, "s/0/0/measured")


def test_text_prompts_get_a_unique_tag(tmp_path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps({"prompt": f"q{i}"}) for i in range(3)) + "\n")
    cfg = WorkloadConfig(kind="jsonl", path=str(path))
    prompts = make_prompts(cfg, 6, "s/0/0/measured") + make_prompts(cfg, 6, "s/1/0/measured")
    assert len(set(prompts)) == 12
    shared = WorkloadConfig(kind="jsonl", path=str(path), unique=False)
    assert set(make_prompts(shared, 6, "x")) == {"q0", "q1", "q2"}
    assert make_prompts(shared, 6, "s/0/0/measured") == make_prompts(shared, 6, "s/1/0/measured")  # same order


def test_builtin_prompts_are_text() -> None:
    prompts = make_prompts(WorkloadConfig(kind="builtin"), 20, "s/0/0/warmup")
    assert len(set(prompts)) == 20 and all(isinstance(p, str) for p in prompts)
