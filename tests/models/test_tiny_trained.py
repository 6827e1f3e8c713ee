"""model=tiny_trained: named by its recipe and text, trained on text it keeps apart from the held-out
slice, saved in the layouts the engines load (the random build's, whose files vLLM 0.32 serves)."""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from tokenizers import Tokenizer

from specexp.models import corpus, tiny, tiny_trained
from specexp.models.tiny import CORPUS, ensure_tiny
from specexp.models.tiny_trained import HEADS, TrainedRecipe, ensure_tiny_trained, recipe_hash, with_noise
from specexp.models.train import Windows


def test_the_recipe_and_both_texts_name_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    base = recipe_hash()
    assert recipe_hash(replace(TrainedRecipe(), ttt_steps=4)) != base
    monkeypatch.setattr(corpus, "HELD_OUT", corpus.HELD_OUT[1:])
    assert recipe_hash() != base


def holds(stream: torch.Tensor, run: list[int]) -> bool:
    """Whether ``run`` occurs in ``stream`` as consecutive ids."""
    hay, needle = stream.to(torch.int64).numpy().tobytes(), torch.tensor(run, dtype=torch.int64).numpy().tobytes()
    at = hay.find(needle)
    while at != -1 and at % 8:  # a match must start on an id, not inside one
        at = hay.find(needle, at + 1)
    return at != -1


def test_a_build_trains_on_no_held_out_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build of the recipe's code path (one step per stage) never hands held-out text to training: the
    tokenizer reads no held-out module and no token stream a model trains on (windows of the target's,
    the draft's and the heads' prompts) holds a run of a held-out module's tokens, while it does hold
    the training modules' (the check can see text that is there)."""
    read, streams = [], []
    corpus_files = tiny._corpus_files

    def reading() -> list[Path]:
        files = corpus_files()
        read.extend(files)
        return files

    class Recorded(Windows):
        def __init__(self, stream: torch.Tensor, *args: int) -> None:
            streams.append(stream)
            super().__init__(stream, *args)

    monkeypatch.setattr(tiny, "_corpus_files", reading)
    monkeypatch.setattr(tiny_trained, "Windows", Recorded)
    quick = TrainedRecipe(target_steps=1, draft_steps=1, eagle3_steps=1, responses=64)
    paths = ensure_tiny_trained(tmp_path, quick)

    held_out = corpus.files(corpus.HELD_OUT)
    assert len(held_out) == len(corpus.HELD_OUT)  # every held-out module is there to be kept out
    assert read and not set(read) & set(held_out)
    assert len(streams) == 3  # the target's (with noise), the draft's, the heads' prompts
    tok = Tokenizer.from_file(str(paths.target / "tokenizer.json"))

    def middle(text: str) -> list[int]:
        ids = tok.encode(text).ids
        return ids[len(ids) // 2 : len(ids) // 2 + 32]

    for stream in streams:
        assert all(holds(stream, middle(text)) for text in corpus.texts(CORPUS))
        assert not any(holds(stream, middle(text)) for text in corpus.texts(corpus.HELD_OUT))


def split(stream: torch.Tensor, eos: int) -> list[tuple[int, ...]]:
    ends = (stream == eos).nonzero().flatten().tolist()
    return [tuple(stream[a + 1 : b + 1].tolist()) for a, b in pairwise([-1, *ends])]


def test_the_targets_stream_is_the_corpus_and_a_tenth_as_much_uniform_noise_in_whole_documents() -> None:
    bos, eos, r = 0, 1, TrainedRecipe()
    gen = torch.Generator().manual_seed(5)
    docs = [torch.tensor([bos, *torch.randint(2, 50, (n,), generator=gen).tolist(), eos]) for n in range(400, 3000, 13)]
    stream = with_noise(docs, r, bos, eos)
    corpus, parts = [tuple(d.tolist()) for d in docs], split(stream, eos)
    known = set(corpus)
    kept, noise = [d for d in parts if d in known], [d for d in parts if d not in known]
    assert sorted(kept) == sorted(corpus) and kept != corpus  # every module, whole, once; shuffled
    total = sum(map(len, corpus))
    assert r.noise_fraction * total <= sum(map(len, noise)) < r.noise_fraction * total + r.noise_len[1] + 2
    assert all(d[0] == bos and d[-1] == eos and r.noise_len[0] <= len(d) - 2 <= r.noise_len[1] for d in noise)
    ids = torch.tensor([i for d in noise for i in d[1:-1]])
    assert not ({bos, eos} & set(ids.tolist())) and len(set(ids.tolist())) > 0.9 * (r.vocab_size - 2)  # uniform
    assert torch.equal(stream, with_noise(docs, r, bos, eos))  # seeded
    assert not torch.equal(stream, with_noise(docs, replace(r, seed=1), bos, eos))


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
