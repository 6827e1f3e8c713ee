"""The reference engine drafts with EAGLE-3 heads as EAGLE-3 does: lossless, and its incremental
draft cache (pending fused states per row) reads exactly what a fresh pass over the sequence reads."""

from __future__ import annotations

import torch

from specexp.models.tiny import TinyPaths
from specexp.reference.drafters import Eagle3Drafter
from specexp.reference.model import Eagle3Head, KVCache, Llama
from specexp.reference.offline import measure
from specexp.reference.request import RequestState
from specexp.reference.sampling import Sampling


def prompts() -> list[list[int]]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randint(2, 2000, (n,), generator=gen).tolist() for n in (5, 9, 17, 3, 12, 7)]


def test_eagle3_drafting_is_lossless_under_greedy(tiny: TinyPaths) -> None:
    base = measure(tiny.target, prompts(), 20, None, "", 0, batch=3)
    for batch in (1, 3):
        a = measure(tiny.target, prompts(), 20, tiny.eagle3, "eagle3", 3, batch=batch)
        assert a.outputs == base.outputs and a.draft_tokens > 0
        assert a.accepted == sum(a.accepted_per_pos) and a.drafts > 0


def test_first_draft_after_steps_equals_a_fresh_pass(tiny: TinyPaths) -> None:
    """After a prefill and two verify steps (one accepting nothing, one accepting 2 of 3), the chain's
    first draft distribution equals the head run from scratch over the whole sequence."""
    dev, dt = torch.device("cpu"), torch.float32
    target = Llama(tiny.target, dt, dev, 256)
    head = Eagle3Head(tiny.eagle3, target, dt, dev, 256)
    drafter = Eagle3Drafter(head, target, 1)
    plain = Sampling([1.0], [1.0], dev)  # q is the head's softmax; unit noise makes each draft its argmax
    ones = torch.ones(1, 3, target.cfg.vocab_size)
    cache = KVCache(target.cfg, 1, dt, dev)
    seq = RequestState([1, 50, 60, 70, 80], 64, 0.0, 1.0, True, lambda _t, _f: None)
    target.forward(torch.tensor([seq.prompt]), torch.zeros(1, dtype=torch.long), 5, cache)
    drafter.prefill([seq], 0)
    seq.tokens.append(90)
    for accepted in (0, 2):
        n = len(seq.tokens)
        draft, _, _ = drafter.propose([seq], [3], plain, ones)
        row = [seq.tokens[-1], *draft[0].tolist()]
        target.forward(torch.tensor([row]), torch.tensor([n - 1]), n + 3, cache)
        seq.tokens += [*row[1 : 1 + accepted], 100 + accepted]  # accepted drafts, then a correction
        drafter.commit([seq], [n], [accepted], 3)
    _, q, _ = drafter.propose([seq], [3], plain, ones)

    toks = torch.tensor([seq.tokens])
    target.forward(toks, torch.zeros(1, dtype=torch.long), toks.shape[1], KVCache(target.cfg, 1, dt, dev))
    fused = head.fuse(target.captured)[:, :-1]  # position t reads token t + 1: the last has none yet
    fresh = KVCache(head.cfg, 1, dt, dev)
    normed, _ = head.draft(toks[:, 1:], fused, torch.zeros(1, dtype=torch.long), toks.shape[1] - 1, fresh)
    torch.testing.assert_close(q[:, 0], head.logits(normed[:, -1]).softmax(-1))
