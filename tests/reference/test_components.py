"""Model, cache, attention backends, step noise, n-gram lookup and detokenization, in process (no server)."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer

from specexp.models.tiny import TinyPaths
from specexp.reference import model as model_module
from specexp.reference.api import Detokenizer
from specexp.reference.drafters import ModelDrafter, NgramDrafter
from specexp.reference.model import KVCache, Llama
from specexp.reference.prometheus import EngineMetrics
from specexp.reference.request import RequestState
from specexp.reference.scheduler import BatchEngine


def test_cached_batched_decode_matches_a_full_forward(tiny: TinyPaths) -> None:
    """Rows of different lengths decoding together through the slot cache give the logits of one
    uncached forward over each whole sequence."""
    model = Llama(tiny.target, torch.float32, torch.device("cpu"), 128)
    gen = torch.Generator().manual_seed(0)
    seqs = [torch.randint(0, model.cfg.vocab_size, (n,), generator=gen).tolist() for n in (5, 9, 3)]
    with torch.inference_mode():
        cache = KVCache(model.cfg, 3, torch.float32, torch.device("cpu"))
        prompts = [s[:-2] for s in seqs]
        width = max(map(len, prompts))
        padded = torch.tensor([p + [0] * (width - len(p)) for p in prompts])
        model.forward(padded, torch.zeros(3, dtype=torch.long), width, cache)
        # Then the last two tokens of each row in one 2-token step (a verify-shaped step).
        tail = torch.tensor([s[-2:] for s in seqs])
        start = torch.tensor([len(p) for p in prompts])
        step = model.logits(model.forward(tail, start, int(start.max()) + 2, cache))
        for row, seq in enumerate(seqs):
            fresh = KVCache(model.cfg, 1, torch.float32, torch.device("cpu"))
            full = model.logits(model.forward(torch.tensor([seq]), torch.zeros(1, dtype=torch.long), len(seq), fresh))
            torch.testing.assert_close(step[row], full[0, -2:], atol=1e-4, rtol=1e-4)


def test_attention_is_never_offered_cudnn(tiny: TinyPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    """cuDNN's per-shape plan setup dominates at these sizes (issue 17): every attention call the model
    makes sees only backends without it; the process-wide choice is restored afterwards."""
    backends = torch.backends.cuda  # the process-wide SDPA switches (they exist on CPU builds too)
    offered: list[tuple[bool, bool]] = []
    sdpa = model_module.F.scaled_dot_product_attention

    def spy(*args, **kwargs) -> torch.Tensor:
        offered.append((backends.cudnn_sdp_enabled(), backends.math_sdp_enabled()))
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(model_module.F, "scaled_dot_product_attention", spy)
    assert backends.cudnn_sdp_enabled()  # torch's default, which the model must not keep
    model = Llama(tiny.target, torch.float32, torch.device("cpu"), 16)
    cache = KVCache(model.cfg, 1, torch.float32, torch.device("cpu"))
    model.forward(torch.tensor([[3, 4, 5]]), torch.zeros(1, dtype=torch.long), 3, cache)
    assert offered == [(False, True)] * model.cfg.num_layers
    assert backends.cudnn_sdp_enabled()


def test_noise_is_drawn_only_for_sampled_rows_each_from_its_own_generator(tiny: TinyPaths) -> None:
    """A sampled row's noise is its generator's stream in a fixed order (k uniforms, then 2k+1 rows of
    Exp(1)), whatever the other rows are: seeded requests reproduce. Greedy rows get 1s, and a batch
    of greedy rows gets one broadcast 1: nothing is built per row or per token."""
    k, cpu = 2, torch.device("cpu")
    target = Llama(tiny.target, torch.float32, cpu, 64)
    engine = BatchEngine(target, ModelDrafter(target, 3), k, 3, 1, EngineMetrics(k))
    vocab = target.cfg.vocab_size

    def request(seed: int | None) -> RequestState:
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        return RequestState([5, 6], 8, 0.0 if seed is None else 1.0, 1.0, True, lambda t, f: None, generator)

    u, exps = engine._noise([request(1), request(None), request(2)])
    for row, seed in ((0, 1), (2, 2)):
        gen = torch.Generator().manual_seed(seed)
        assert torch.equal(u[row], torch.rand(k, generator=gen))
        assert torch.equal(exps[row], torch.empty(2 * k + 1, vocab).exponential_(generator=gen))
    assert bool((u[1] == 1).all()) and bool((exps[1] == 1).all())
    u, exps = engine._noise([request(None), request(None)])
    assert u.shape == (2, k) and exps.shape == (2, 2 * k + 1, vocab)
    assert bool((u == 1).all()) and bool((exps == 1).all())
    assert exps.untyped_storage().nbytes() == exps.element_size()


def test_ngram_lookup_takes_the_latest_longest_match() -> None:
    drafter = NgramDrafter(1, 3, 100, torch.device("cpu"))
    assert drafter.lookup([1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 2, 3], 2) == [7, 8]  # "2 3" latest at index 5
    assert drafter.lookup([4, 5, 6, 1, 2, 3, 4, 5, 6], 3) == [1, 2, 3]  # 3-gram "4 5 6"
    assert drafter.lookup([1, 2, 3], 2) == []  # no earlier occurrence of any suffix
    assert drafter.lookup([7, 1, 7], 4) == [1, 7]  # fewer than k tokens follow the match


def test_detokenizer_never_splits_a_character(tiny: TinyPaths) -> None:
    tok = Tokenizer.from_file(str(tiny.target / "tokenizer.json"))
    text = "naïve café → 日本語 ok"
    ids = tok.encode(text, add_special_tokens=False).ids
    detok = Detokenizer(tok)
    pieces = [detok.add([i], final=n == len(ids) - 1) for n, i in enumerate(ids)]
    assert "".join(pieces) == text
    assert all("\ufffd" not in piece for piece in pieces)
    assert any("\ufffd" in tok.decode([i]) for i in ids)  # some token holds part of a character
