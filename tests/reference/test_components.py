"""Model, cache, n-gram lookup and detokenization, in process (no server)."""

from __future__ import annotations

import torch
from tokenizers import Tokenizer

from specexp.models.tiny import TinyPaths
from specexp.reference.drafters import NgramDrafter
from specexp.reference.model import KVCache, Llama
from specexp.reference.server import Detokenizer


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
