"""The trainable Llama's cached greedy generation (the EAGLE-3 heads' training responses) matches its
full forward pass: a wrong cache (positions, GQA repeat, masking) would train the heads on responses the
served target never writes."""

from __future__ import annotations

import torch

from specexp.models.nets import CausalLM, Shape


def test_cached_greedy_matches_the_full_forward_pass() -> None:
    torch.manual_seed(0)
    model = CausalLM(Shape(vocab=64, hidden=32, inter=64, heads=4, kv_heads=2, eps=1e-5, theta=1e4), 2).eval()
    prompts = torch.randint(0, 64, (3, 5))
    ids = prompts
    with torch.no_grad():
        for _ in range(12):
            logits, _ = model(ids)
            ids = torch.cat([ids, logits[:, -1:].argmax(-1)], 1)
    assert torch.equal(model.greedy(prompts, 12), ids)
