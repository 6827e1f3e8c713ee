"""model=tiny builds offline, deterministically, once per recipe."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from specexp.models.tiny import TinyPaths, ensure_tiny


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> TinyPaths:
    return ensure_tiny(tmp_path_factory.mktemp("outputs"))


def test_two_builds_are_byte_identical_and_reused(built: TinyPaths, tmp_path: Path) -> None:
    a, b = built, ensure_tiny(tmp_path)
    assert digests(a.root) == digests(b.root)
    assert {"target/model.safetensors", "draft/model.safetensors", "eagle3/model.safetensors"} <= set(digests(a.root))
    stamp = (a.root / "recipe.json").stat().st_mtime_ns
    assert ensure_tiny(a.root.parent.parent) == a and (a.root / "recipe.json").stat().st_mtime_ns == stamp
    assert not [p for p in a.root.parent.iterdir() if p.name.startswith(".tiny-")]


def test_model_dirs_are_self_contained_hf_checkpoints(built: TinyPaths) -> None:
    paths = built
    for d in (paths.target, paths.draft, paths.eagle3):
        names = {p.name for p in d.iterdir()}
        assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    target = json.loads((paths.target / "config.json").read_text())
    eagle = json.loads((paths.eagle3 / "config.json").read_text())
    assert target["architectures"] == ["LlamaForCausalLM"] and target["tie_word_embeddings"] is False
    assert eagle["architectures"] == ["LlamaForCausalLMEagle3"]
    ids = eagle["eagle_aux_hidden_state_layer_ids"]
    assert len(set(ids)) == len(ids) == 3 and all(0 < i < target["num_hidden_layers"] for i in ids)
    assert paths.tiny_self == paths.target
