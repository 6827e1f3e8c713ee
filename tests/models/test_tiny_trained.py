"""model=tiny_trained: named by its recipe and text, trained on text it keeps apart from the held-out
slice, saved in the layouts the engines load (the random build's, whose files vLLM 0.32 serves)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from safetensors import safe_open

from specexp.models import corpus
from specexp.models.tiny import CORPUS, ensure_tiny
from specexp.models.tiny_trained import HEADS, TrainedRecipe, ensure_tiny_trained, recipe_hash


def test_the_recipe_and_both_texts_name_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    base = recipe_hash()
    assert recipe_hash(replace(TrainedRecipe(), ttt_steps=4)) != base
    monkeypatch.setattr(corpus, "HELD_OUT", corpus.HELD_OUT[1:])
    assert recipe_hash() != base


def test_the_held_out_slice_is_kept_out_of_training() -> None:
    assert not set(CORPUS) & set(corpus.HELD_OUT)
    assert len(corpus.files(corpus.HELD_OUT)) == len(corpus.HELD_OUT)


def names(folder: Path) -> set[str]:
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return set(f.keys())


@pytest.mark.slow  # the trained build: minutes on two cores the first time, then cached
def test_checkpoints_are_in_the_layouts_the_engines_load(shared_outputs: Path) -> None:
    trained, random = ensure_tiny_trained(shared_outputs), ensure_tiny(shared_outputs)
    target = json.loads((trained.target / "config.json").read_text())
    assert target["architectures"] == ["LlamaForCausalLM"]
    assert names(trained.target) == {
        n
        for n in names(random.target)
        if not n.startswith("model.layers.") or int(n.split(".")[2]) < target["num_hidden_layers"]
    }
    for head in HEADS:
        folder = getattr(trained, head)
        config = json.loads((folder / "config.json").read_text())
        assert config["architectures"] == ["LlamaForCausalLMEagle3"]
        assert max(config["eagle_aux_hidden_state_layer_ids"]) <= target["num_hidden_layers"]
        assert names(folder) == names(random.eagle3)
        assert (folder / "tokenizer.json").read_bytes() == (trained.target / "tokenizer.json").read_bytes()
